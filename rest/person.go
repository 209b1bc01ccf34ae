package rest

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"berth/account"
	"berth/httpserve"
	"berth/share"
	"berth/vfs"
)

// personRoutes registers the person routes of spec 4.8 (activity is the
// activity log's) and the organization's list of persons.
func (s *server) personRoutes() {
	s.handle("GET /api/2/person", s.authed(s.getSelf))
	s.handle("GET /api/2/person/{ref}", s.authed(s.getPerson))
	s.handle("POST /api/2/person/create", s.authed(s.createPerson))
	s.handle("POST /api/2/person/{id}/update", s.authed(s.updatePerson))
	s.handle("POST /api/2/person/{id}/delete", s.authed(s.deletePerson))
	s.handle("POST /api/2/person/{id}/roots/create", s.authed(s.createPersonRoot))
	s.handle("POST /api/2/person/{id}/unlock", s.authed(s.unlockPerson))
	s.handle("GET /api/2/organization/{org}/persons", s.authed(s.organizationPersons))
}

// personBody is the person object of spec 2.9, exactly these fields.
type personBody struct {
	ID          uint64 `json:"id"`
	Email       string `json:"email"`
	Username    string `json:"username"`
	CompanyID   uint64 `json:"company_id"`
	FirstName   string `json:"first_name"`
	LastName    string `json:"last_name"`
	DisplayName string `json:"display_name"`
	// RootID is null while the person has no sync root.
	RootID *uint64 `json:"root_id"`
	// Roots are root objects without children.
	Roots               []rootJSON `json:"roots"`
	SpaceQuota          int64      `json:"space_quota"`
	SpaceQuotaFormatted string     `json:"space_quota_formatted"`
	SpaceUsage          int64      `json:"space_usage"`
	SpaceUsageFormatted string     `json:"space_usage_formatted"`
	CanShare            bool       `json:"can_share"`
	CompanyPolicy       policyBody `json:"company_policy"`
	Type                string     `json:"type"`
}

// policyBody is the policy object of spec 2.7, every field.
type policyBody struct {
	CompanyID                uint64  `json:"company_id"`
	ADEnabled                bool    `json:"ad_enabled"`
	AdminBrowseFiles         bool    `json:"admin_browse_files"`
	AdminBrowseRemote        bool    `json:"admin_browse_remote"`
	AdminCreateUsers         bool    `json:"admin_create_users"`
	BackupsEnabled           bool    `json:"backups_enabled"`
	BrandingEnabled          bool    `json:"branding_enabled"`
	ChangePasswordFrequency  *string `json:"change_password_frequency"`
	DeactivateTokenFrequency string  `json:"deactivate_token_frequency"`
	ExcludedExtensions       string  `json:"excluded_extensions"`
	LockedExtensions         string  `json:"locked_extensions"`
	FileServerEnabled        bool    `json:"file_server_enabled"`
	MaxFileSize              int64   `json:"max_file_size"`
	MonthlyCostCents         int64   `json:"monthly_cost_cents"`
	MonthlyCostCurrency      string  `json:"monthly_cost_currency"`
	NumOrgsMaximum           int64   `json:"num_orgs_maximum"`
	NumUsersMaximum          int64   `json:"num_users_maximum"`
	NumUsersMinimum          int64   `json:"num_users_minimum"`
	PSAEnabled               bool    `json:"psa_enabled"`
	PurgeDeleted             bool    `json:"purge_deleted"`
	PurgeDeletedFrequency    string  `json:"purge_deleted_frequency"`
	RequireMobileLock        bool    `json:"require_mobile_lock"`
	RequireTwoStepAuth       bool    `json:"require_two_step_auth"`
	SecureShares             bool    `json:"secure_shares"`
	ServicePlansEnabled      bool    `json:"service_plans_enabled"`
	SpaceQuota               string  `json:"space_quota"`
	SpaceQuotaFormatted      string  `json:"space_quota_formatted"`
	TrialLengthDays          int64   `json:"trial_length_days"`
	TrimRevisions            bool    `json:"trim_revisions"`
	TrimRevisionsX           string  `json:"trim_revisions_x"`
	UserCreateBackups        bool    `json:"user_create_backups"`
	UserCreateShares         bool    `json:"user_create_shares"`
	UserLockFiles            bool    `json:"user_lock_files"`
	UserPurgeDeleted         bool    `json:"user_purge_deleted"`
	UserTrimRevisions        bool    `json:"user_trim_revisions"`
	WebDAVEnabled            bool    `json:"webdav_enabled"`
	Type                     string  `json:"type"`
}

// getSelf answers GET /api/2/person: the caller. A guest is answered its
// guest object (type "guest"): it is the authenticated user, and has no
// person object.
func (s *server) getSelf(r *http.Request) (any, error) {
	c := callerOf(r)
	if c.Person.Guest {
		return encodeGuest(c.Person), nil
	}
	return s.encodePerson(r.Context(), c, c.Person)
}

// getPerson answers GET /api/2/person/{id or e-mail}: a person reads
// themself, an administrator the persons of their organization and of
// those below it (share.Person). Anyone else, and a guest's id, is 404,
// like an id that does not exist, so the route does not reveal which ids
// and addresses are taken.
func (s *server) getPerson(r *http.Request) (any, error) {
	p, err := s.personOrGuest(r, r.PathValue("ref"), false, share.PersonRead)
	if err != nil {
		return nil, err
	}
	return s.encodePerson(r.Context(), callerOf(r), p)
}

// personOrGuest resolves ref, a decimal id or an e-mail address, to the person
// (guest false) or guest (guest true) it names, if the caller may do act
// with them. The kind is checked once the caller is known to see the
// account, and before what act demands, so an account of the other kind
// is 404 whatever act is.
func (s *server) personOrGuest(r *http.Request, ref string, guest bool, act share.PersonAction) (account.Person, error) {
	ctx := r.Context()
	var id uint64
	if strings.Contains(ref, "@") {
		p, err := s.accounts.PersonByLogin(ctx, ref)
		// Logins share one namespace: make sure ref named an e-mail address.
		if errors.Is(err, account.ErrNotFound) || (err == nil && !strings.EqualFold(p.Email, ref)) {
			return account.Person{}, ErrNotFound
		}
		if err != nil {
			return account.Person{}, err
		}
		id = p.ID
	} else {
		n, err := strconv.ParseUint(ref, 10, 64)
		if err != nil || n == 0 {
			return account.Person{}, ErrNotFound
		}
		id = n
	}
	c := callerOf(r)
	p, err := s.shares.Person(ctx, c, id, share.PersonRead)
	if err != nil {
		return account.Person{}, err
	}
	if p.Guest != guest {
		return account.Person{}, share.ErrNotFound
	}
	if act != share.PersonRead {
		return s.shares.Person(ctx, c, id, act)
	}
	return p, nil
}

// createPerson answers POST /api/2/person/create: it creates the person,
// then their sync root (two domains, so rest orchestrates). Form fields:
// company_id (default: the caller's organization), username, email,
// first_name, last_name, display_name, password (optional: without one
// the person cannot log in until an administrator sets one with update),
// admin, space_quota.
func (s *server) createPerson(r *http.Request) (any, error) {
	c := callerOf(r)
	ctx := r.Context()
	f, err := accountForm(r)
	if err != nil {
		return nil, err
	}
	orgID, err := companyID(f, c)
	if err != nil {
		return nil, err
	}
	in := account.PersonInput{
		OrganizationID: orgID,
		Username:       f.Get("username"),
		Email:          f.Get("email"),
		FirstName:      f.Get("first_name"),
		LastName:       f.Get("last_name"),
		DisplayName:    f.Get("display_name"),
		Password:       f.Get("password"),
		NoPassword:     !f.Has("password"),
	}
	if in.Admin, _, err = formFlag(f, "admin"); err != nil {
		return nil, err
	}
	if in.SpaceQuota, _, err = formQuota(f); err != nil {
		return nil, err
	}
	if _, err := s.shares.Organization(ctx, c, orgID, share.OrgCreateUsers); err != nil {
		return nil, err
	}
	p, err := s.accounts.CreatePerson(ctx, in)
	if err != nil {
		return nil, err
	}
	return s.withSyncRoot(ctx, c, p)
}

// withSyncRoot creates new person p's sync root and answers the person
// object. A root that could not be created leaves the person in place,
// and the error says so and how to make the root later.
func (s *server) withSyncRoot(ctx context.Context, c caller, p account.Person) (any, error) {
	if _, err := s.shares.NewRoot(ctx, p, p.Username, vfs.RootSync); err != nil {
		return nil, Describe(err, "person %d was created, but their sync root was not; POST /api/2/person/%d/roots/create makes it", p.ID, p.ID)
	}
	p, err := s.accounts.Person(ctx, p.ID)
	if err != nil {
		return nil, err
	}
	return s.encodePerson(ctx, c, p)
}

// accountForm reads the form of a request that may carry a password:
// form's fields, with password and current_password refused in the
// query string, since URLs end up in logs and histories.
func accountForm(r *http.Request) (url.Values, error) {
	return secretForm(r, "password", "current_password")
}

// secretForm reads form's fields, refusing the secrets named in the
// query string: every route that takes a password or a code reads its
// form through it.
func secretForm(r *http.Request, secrets ...string) (url.Values, error) {
	q, err := query(r)
	if err != nil {
		return nil, err
	}
	for _, name := range secrets {
		if q.Has(name) {
			return nil, Describe(ErrInvalidRequest, "%s is taken from the request body only, never from the URL", name)
		}
	}
	return form(r)
}

// companyID reads the form's company_id, the caller's organization when
// it is absent.
func companyID(f url.Values, c caller) (uint64, error) {
	if !f.Has("company_id") {
		return c.Person.OrganizationID, nil
	}
	id, err := strconv.ParseUint(f.Get("company_id"), 10, 64)
	if err != nil || id == 0 {
		return 0, Describe(ErrInvalidRequest, "company_id must be an organization id")
	}
	return id, nil
}

// formFlag reads boolean field name ("true", "false", "1", "0"); ok is
// false when it is absent.
func formFlag(f url.Values, name string) (v, ok bool, err error) {
	if !f.Has(name) {
		return false, false, nil
	}
	v, err = boolParam(f, name)
	return v, err == nil, err
}

// formQuota reads space_quota, a whole number of bytes (0: the
// organization's quota alone); ok is false when it is absent.
func formQuota(f url.Values) (n int64, ok bool, err error) {
	if !f.Has("space_quota") {
		return 0, false, nil
	}
	n, err = strconv.ParseInt(f.Get("space_quota"), 10, 64)
	if err != nil || n < 0 {
		return 0, false, Describe(ErrInvalidRequest, "space_quota must be a whole number of bytes, 0 or more")
	}
	return n, true, nil
}

// updatePerson answers POST /api/2/person/{id}/update. Form fields:
// username, email, first_name, last_name, display_name (the person and
// their administrators); space_quota, admin, active (administrators);
// password (an administrator sets another's; a person changes their own
// with current_password). company_id is refused: a person does not move.
func (s *server) updatePerson(r *http.Request) (any, error) {
	f, err := accountForm(r)
	if err != nil {
		return nil, err
	}
	p, err := s.personOrGuest(r, r.PathValue("id"), false, share.PersonUpdateSelf)
	if err != nil {
		return nil, err
	}
	if f.Has("company_id") {
		return nil, Describe(ErrInvalidRequest, "company_id cannot change: a person does not move to another organization")
	}
	ch, err := readChanges(f, false)
	if err != nil {
		return nil, err
	}
	p, err = s.applyChanges(r, p, ch)
	if err != nil {
		return nil, err
	}
	return s.encodePerson(r.Context(), callerOf(r), p)
}

// changes are the fields an update form sets; nil fields are absent.
type changes struct {
	username, email, firstName, lastName, displayName *string
	quota                                             *int64
	admin, active                                     *bool
	password, current                                 *string
}

// administrative reports whether ch sets a field only administrators
// set, the password of someone other than self aside.
func (ch changes) administrative() bool {
	return ch.quota != nil || ch.admin != nil || ch.active != nil
}

// fields reports whether ch sets a field of the person, the password
// aside.
func (ch changes) fields() bool {
	return ch.username != nil || ch.email != nil || ch.firstName != nil || ch.lastName != nil ||
		ch.displayName != nil || ch.quota != nil || ch.admin != nil || ch.active != nil
}

// readChanges reads an update form. A guest has no username, display
// name, quota or administrator flag.
func readChanges(f url.Values, guest bool) (changes, error) {
	var ch changes
	str := func(name string) *string {
		if !f.Has(name) {
			return nil
		}
		v := f.Get(name)
		return &v
	}
	ch.email, ch.firstName, ch.lastName = str("email"), str("first_name"), str("last_name")
	ch.password, ch.current = str("password"), str("current_password")
	if v, ok, err := formFlag(f, "active"); err != nil {
		return ch, err
	} else if ok {
		ch.active = &v
	}
	if guest {
		return ch, nil
	}
	ch.username, ch.displayName = str("username"), str("display_name")
	if v, ok, err := formFlag(f, "admin"); err != nil {
		return ch, err
	} else if ok {
		ch.admin = &v
	}
	if v, ok, err := formQuota(f); err != nil {
		return ch, err
	} else if ok {
		ch.quota = &v
	}
	return ch, nil
}

// applyChanges checks who may make ch to p, then makes them: first the
// fields, then the password, each checked before anything is stored.
func (s *server) applyChanges(r *http.Request, p account.Person, ch changes) (account.Person, error) {
	ctx := r.Context()
	c := callerOf(r)
	self := p.ID == c.Person.ID
	if ch.administrative() || (ch.password != nil && !self) {
		if _, err := s.shares.Person(ctx, c, p.ID, share.PersonAdminister); err != nil {
			return account.Person{}, err
		}
	}
	if self && ch.admin != nil && !*ch.admin && p.Admin {
		return account.Person{}, Describe(ErrForbidden, "an administrator cannot take away their own administrator flag; another administrator does")
	}
	if self && ch.active != nil && !*ch.active {
		return account.Person{}, Describe(ErrForbidden, "nobody disables their own account; an administrator does")
	}
	if ch.password != nil {
		if err := s.accounts.CheckPassword(*ch.password); err != nil {
			return account.Person{}, err
		}
		if self {
			if err := s.checkCurrentPassword(ctx, p, ch.current); err != nil {
				return account.Person{}, err
			}
		}
	} else if self && ch.email != nil && !strings.EqualFold(*ch.email, p.Email) {
		// The e-mail address is a login and where the e-mail mode's
		// sign-in codes go: with a token alone, a thief would move the
		// second factor to their own mailbox.
		if err := s.reauthenticate(ctx, p, ch.current, "change your own e-mail address"); err != nil {
			return account.Person{}, err
		}
	}
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	if ch.password != nil && !ch.fields() {
		// A password alone: no update of the fields, which recorded a
		// person_updated that changed nothing beside the
		// password_changed (or _reset) of the change.
		if err := s.accounts.SetPassword(ctx, p.ID, *ch.password); err != nil {
			return account.Person{}, err
		}
		return s.accounts.Person(ctx, p.ID)
	}
	update := s.accounts.UpdatePerson
	if p.Guest {
		update = s.accounts.UpdateGuest
	}
	p, err := update(ctx, p.ID, func(q *account.Person) error {
		set(&q.Username, ch.username)
		set(&q.Email, ch.email)
		set(&q.FirstName, ch.firstName)
		set(&q.LastName, ch.lastName)
		set(&q.DisplayName, ch.displayName)
		if ch.quota != nil {
			q.SpaceQuota = *ch.quota
		}
		if ch.admin != nil {
			q.Admin = *ch.admin
		}
		if ch.active != nil {
			q.Active = *ch.active
		}
		return nil
	})
	if err != nil {
		return account.Person{}, err
	}
	if ch.password != nil {
		if err := s.accounts.SetPassword(ctx, p.ID, *ch.password); err != nil {
			return account.Person{}, err
		}
	}
	return p, nil
}

// checkCurrentPassword verifies the current password a person gives to
// change their own. It goes through the login check, so wrong guesses
// count towards the lockout as wrong logins do: a stolen token cannot be
// used to guess the password. A wrong one is 403 forbidden.
func (s *server) checkCurrentPassword(ctx context.Context, p account.Person, current *string) error {
	return s.reauthenticate(ctx, p, current, "change your own password")
}

// reauthenticate asks person p, who acts on their own account with a
// token, for their current password before what the token alone must
// not do (what says what, for the answer that asks for it): change the
// password, or make or remove a credential of their own (a device
// password, two-step verification, its recovery codes). A token stolen
// from a device, or a browser left signed in, then cannot be turned into
// a credential that outlives it, nor the account's second factor into
// the thief's. Missing is 400 invalid_request; wrong is 403 forbidden,
// counted towards the lockout as a wrong login.
func (s *server) reauthenticate(ctx context.Context, p account.Person, current *string, what string) error {
	if current == nil || *current == "" {
		return Describe(ErrInvalidRequest, "current_password is required to %s", what)
	}
	q, err := s.accounts.Authenticate(ctx, p.Username, *current)
	if errors.Is(err, account.ErrInvalidCredentials) || (err == nil && q.ID != p.ID) {
		return Describe(ErrForbidden, "current_password is wrong")
	}
	return err
}

// deletePerson answers POST /api/2/person/{id}/delete: the person's roots
// are deleted in vfs (they answer 410 root_deleted from then on), then
// the person, whose sessions end with them.
func (s *server) deletePerson(r *http.Request) (any, error) {
	ctx := r.Context()
	p, err := s.personOrGuest(r, r.PathValue("id"), false, share.PersonDelete)
	if err != nil {
		return nil, err
	}
	if err := s.deletePersonRoots(ctx, p); err != nil {
		return nil, err
	}
	if err := s.accounts.DeletePerson(ctx, p.ID); err != nil {
		return nil, err
	}
	// A root made while the roots above were deleted (roots/create
	// racing this delete) is recorded as theirs by now: delete it too,
	// so no live root outlives its owner. One made later is refused
	// (share.NewRoot: the owner is gone).
	return nil, s.deletePersonRoots(ctx, p)
}

// deletePersonRoots deletes in vfs every root recorded as p's.
func (s *server) deletePersonRoots(ctx context.Context, p account.Person) error {
	roots, err := s.accounts.PersonRoots(ctx, p)
	if err != nil {
		return err
	}
	for _, id := range roots {
		err := s.fs.DeleteRoot(ctx, id)
		if err != nil && !errors.Is(err, vfs.ErrRootDeleted) && !errors.Is(err, vfs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// createPersonRoot answers POST /api/2/person/{id}/roots/create, for the
// person themself and their administrators: the person's sync root,
// created when they have none (or theirs was deleted), or the one they
// have.
func (s *server) createPersonRoot(r *http.Request) (any, error) {
	ctx := r.Context()
	c := callerOf(r)
	p, err := s.personOrGuest(r, r.PathValue("id"), false, share.PersonUpdateSelf)
	if err != nil {
		return nil, err
	}
	if p.RootID != 0 {
		root, err := s.fs.Root(ctx, p.RootID)
		switch {
		case err == nil:
			u, err := s.fs.Usage(ctx, root.ID)
			if err != nil {
				return nil, err
			}
			return encodeRoot(root, u, s.rootPermissions(ctx, c, p, root.ID)), nil
		case errors.Is(err, vfs.ErrRootDeleted) || errors.Is(err, vfs.ErrNotExist):
			if err := s.accounts.SetPersonRoot(ctx, p.ID, 0); err != nil {
				return nil, err
			}
			p.RootID = 0
		default:
			return nil, err
		}
	}
	root, err := s.shares.NewRoot(ctx, p, p.Username, vfs.RootSync)
	if err != nil {
		return nil, err
	}
	return encodeRoot(root, vfs.Usage{}, s.rootPermissions(ctx, c, p, root.ID)), nil
}

// unlockPerson answers POST /api/2/person/{id}/unlock (berth's own
// route): an administrator ends the lock that failed logins put on the
// person, and clears the count, so the next login gets every attempt.
func (s *server) unlockPerson(r *http.Request) (any, error) {
	p, err := s.personOrGuest(r, r.PathValue("id"), false, share.PersonAdminister)
	if err != nil {
		return nil, err
	}
	return nil, s.accounts.Unlock(r.Context(), p.ID)
}

// organizationPersons answers GET /api/2/organization/{org}/persons, one
// page, for the organization's administrators and those above them.
func (s *server) organizationPersons(r *http.Request) (any, error) {
	ctx := r.Context()
	c := callerOf(r)
	org, pg, err := s.orgPage(r)
	if err != nil {
		return nil, err
	}
	ps, total, err := s.accounts.Persons(ctx, org.ID, pg.Offset, pg.Limit)
	if err != nil {
		return nil, err
	}
	pol, err := s.accounts.EffectivePolicy(ctx, org.ID)
	if err != nil {
		return nil, err
	}
	out := make([]personBody, 0, len(ps))
	for _, p := range ps {
		b, err := s.encodePersonIn(ctx, c, p, pol)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return paged(pg, out, total), nil
}

// encodePerson builds the person object of p for caller c.
func (s *server) encodePerson(ctx context.Context, c caller, p account.Person) (personBody, error) {
	pol := c.Organization.Policy
	if p.OrganizationID != c.Organization.ID {
		var err error
		if pol, err = s.accounts.EffectivePolicy(ctx, p.OrganizationID); err != nil {
			return personBody{}, err
		}
	}
	return s.encodePersonIn(ctx, c, p, pol)
}

// encodePersonIn builds the person object of p for caller c: pol is the
// policy p acts under (p's organization's tightened by every ancestor's,
// as the caller's own is), so that company_policy and can_share say what
// binds p and read alike whoever asks; the roots' permissions are c's.
func (s *server) encodePersonIn(ctx context.Context, c caller, p account.Person, pol account.Policy) (personBody, error) {
	quota := p.QuotaUnder(pol)
	body := personBody{
		ID:                  p.ID,
		Email:               p.Email,
		Username:            p.Username,
		CompanyID:           p.OrganizationID,
		FirstName:           p.FirstName,
		LastName:            p.LastName,
		DisplayName:         p.DisplayName,
		Roots:               []rootJSON{},
		SpaceQuota:          quota,
		SpaceQuotaFormatted: formatQuota(quota),
		CanShare:            p.CanShare(pol),
		CompanyPolicy:       encodePolicy(pol),
		Type:                "person",
	}
	if p.RootID != 0 {
		id := p.RootID
		body.RootID = &id
		root, err := s.personRoot(ctx, c, p, id)
		switch {
		case errors.Is(err, vfs.ErrRootDeleted) || errors.Is(err, vfs.ErrNotExist):
			// A deleted sync root is no longer reachable; root_id still
			// names it until a new one is created.
		case err != nil:
			return personBody{}, err
		default:
			body.Roots = append(body.Roots, root)
		}
	}
	shared, err := s.subscribedRoots(ctx, p)
	if err != nil {
		return personBody{}, err
	}
	body.Roots = append(body.Roots, shared...)
	usage, err := s.personUsage(ctx, p, body.Roots)
	if err != nil {
		return personBody{}, err
	}
	body.SpaceUsage, body.SpaceUsageFormatted = usage, httpserve.FormatSize(usage)
	return body, nil
}

// subscribedRoots are the root objects of the organization shares p
// subscribes to (spec 2.9's roots: "root objects the person is subscribed
// to"), with p's permissions on each, not the asking administrator's: the
// object says what the person can do (docs/api.md "Person roots"). A
// disabled person reaches nothing, so lists none.
func (s *server) subscribedRoots(ctx context.Context, p account.Person) ([]rootJSON, error) {
	pc, err := s.accounts.Caller(ctx, p.ID)
	if errors.Is(err, account.ErrInactive) || errors.Is(err, account.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	all, err := s.shares.Roots(ctx, pc)
	if errors.Is(err, account.ErrInactive) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []rootJSON
	for _, a := range all {
		if a.Root.ID == p.RootID {
			continue // the sync root, listed first with the viewer's permissions
		}
		u, err := s.fs.Usage(ctx, a.Root.ID)
		if err != nil {
			return nil, err
		}
		out = append(out, encodeRoot(a.Root, u, permissions(a.Perms)))
	}
	return out, nil
}

// personUsage is the person's space_usage: the physical size of their
// roots, live and deleted until purged (their bytes are stored until
// then, and their quota bounds them), from the ledger. It is the one
// place that computes it.
func (s *server) personUsage(ctx context.Context, p account.Person, _ []rootJSON) (int64, error) {
	// Every root of the person, of every type, from the ledger.
	u, err := s.fs.TallyUsage(ctx, account.TallyPerson(p.ID))
	if err != nil {
		return 0, err
	}
	return u.PhysicalSize, nil
}

// personRoot returns the root object of root id, which person p owns, as
// caller c sees it.
func (s *server) personRoot(ctx context.Context, c caller, p account.Person, id uint64) (rootJSON, error) {
	root, err := s.fs.Root(ctx, id)
	if err != nil {
		return rootJSON{}, err
	}
	u, err := s.fs.Usage(ctx, id)
	if err != nil {
		return rootJSON{}, err
	}
	return encodeRoot(root, u, s.rootPermissions(ctx, c, p, id)), nil
}

// rootPermissions are caller c's permissions on root id of person p (spec
// 2.1: the authenticated user's): an owner's, an administrator's under
// admin_browse_files, or none.
func (s *server) rootPermissions(ctx context.Context, c caller, p account.Person, id uint64) []string {
	if p.ID == c.Person.ID {
		return ownerPermissions()
	}
	a, err := s.shares.Root(ctx, c, id)
	if err != nil {
		return []string{}
	}
	return permissions(a.Perms)
}

// formatQuota is httpserve.FormatSize with 0 written as "unlimited", which is what a
// zero quota means.
func formatQuota(n int64) string {
	if n == 0 {
		return "unlimited"
	}
	return httpserve.FormatSize(n)
}

func encodePolicy(p account.Policy) policyBody {
	return policyBody{
		CompanyID:                p.CompanyID,
		ADEnabled:                p.ADEnabled,
		AdminBrowseFiles:         p.AdminBrowseFiles,
		AdminBrowseRemote:        p.AdminBrowseRemote,
		AdminCreateUsers:         p.AdminCreateUsers,
		BackupsEnabled:           p.BackupsEnabled,
		BrandingEnabled:          p.BrandingEnabled,
		ChangePasswordFrequency:  p.ChangePasswordFrequency,
		DeactivateTokenFrequency: p.DeactivateTokenFrequency,
		ExcludedExtensions:       p.ExcludedExtensions,
		LockedExtensions:         p.LockedExtensions,
		FileServerEnabled:        p.FileServerEnabled,
		MaxFileSize:              p.MaxFileSize,
		MonthlyCostCents:         p.MonthlyCostCents,
		MonthlyCostCurrency:      p.MonthlyCostCurrency,
		NumOrgsMaximum:           p.NumOrgsMaximum,
		NumUsersMaximum:          p.NumUsersMaximum,
		NumUsersMinimum:          p.NumUsersMinimum,
		PSAEnabled:               p.PSAEnabled,
		PurgeDeleted:             p.PurgeDeleted,
		PurgeDeletedFrequency:    p.PurgeDeletedFrequency,
		RequireMobileLock:        p.RequireMobileLock,
		RequireTwoStepAuth:       p.RequireTwoStepAuth,
		SecureShares:             p.SecureShares,
		ServicePlansEnabled:      p.ServicePlansEnabled,
		SpaceQuota:               p.SpaceQuota,
		SpaceQuotaFormatted:      formatQuota(p.SpaceQuotaBytes()),
		TrialLengthDays:          p.TrialLengthDays,
		TrimRevisions:            p.TrimRevisions,
		TrimRevisionsX:           p.TrimRevisionsX,
		UserCreateBackups:        p.UserCreateBackups,
		UserCreateShares:         p.UserCreateShares,
		UserLockFiles:            p.UserLockFiles,
		UserPurgeDeleted:         p.UserPurgeDeleted,
		UserTrimRevisions:        p.UserTrimRevisions,
		WebDAVEnabled:            p.WebDAVEnabled,
		Type:                     "policy",
	}
}
