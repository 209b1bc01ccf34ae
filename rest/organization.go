package rest

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"berth/account"
	"berth/share"
	"berth/vfs"
)

// organizationRoutes registers the organization routes of spec 4.6 that
// are the organization's own (persons, guests, groups, activity and usage
// register theirs beside them), and the license key route (berth's).
func (s *server) organizationRoutes() {
	s.handle("GET /api/2/organization/{org}", s.authed(s.getOrganization))
	s.handle("GET /api/2/organization/{org}/license_key", s.authed(s.getLicenseKey))
	s.handle("POST /api/2/organization/{org}/organizations/create", s.authed(s.createOrganization))
	s.handle("POST /api/2/organization/{org}/update", s.authed(s.updateOrganization))
	s.handle("POST /api/2/organization/{org}/disable", s.authed(s.disableOrganization))
	s.handle("POST /api/2/organization/{org}/enable", s.authed(s.enableOrganization))
	s.handle("POST /api/2/organization/{org}/delete", s.authed(s.deleteOrganization))
	s.handle("POST /api/2/organization/{org}/policy/update", s.authed(s.updatePolicy))
	s.handle("GET /api/2/organization/{org}/organizations", s.authed(s.listOrganizations))
	s.handle("GET /api/2/organization/{org}/roots", s.authed(s.listOrganizationRoots))
	s.handle("GET /api/2/organization/{org}/root/{root_id}", s.authed(s.getOrganizationRoot))
	s.handle("GET /api/2/organization/{org}/machines", s.authed(s.listOrganizationMachines))
}

// organizationBody is the organization object of spec 2.6, exactly these
// fields. parent_id is 0 for a top-level organization (the spec types it
// integer, without null).
type organizationBody struct {
	ID                        uint64     `json:"id"`
	ParentID                  uint64     `json:"parent_id"`
	Name                      string     `json:"name"`
	Slug                      string     `json:"slug"`
	Description               string     `json:"description"`
	Email                     string     `json:"email"`
	Hostname                  string     `json:"hostname"`
	Created                   string     `json:"created"`
	Active                    bool       `json:"active"`
	TrialUntil                *string    `json:"trial_until"`
	PrivacyMode               bool       `json:"privacy_mode"`
	Throttled                 bool       `json:"throttled"`
	BandwidthThrottle         *int64     `json:"bandwidth_throttle"`
	DefaultEncryption         int64      `json:"default_encryption"`
	EmailServerID             *uint64    `json:"email_server_id"`
	EmailTemplates            bool       `json:"email_templates"`
	PlanID                    *uint64    `json:"plan_id"`
	Policy                    policyBody `json:"policy"`
	ShareDisclaimer           *string    `json:"share_disclaimer"`
	SubscriptionUUID          *string    `json:"subscription_uuid"`
	ThrottleExceptionDays     *string    `json:"throttle_exception_days"`
	ThrottleExceptionDOW      *string    `json:"throttle_exception_dow"`
	ThrottleExceptionEnd      *string    `json:"throttle_exception_end"`
	ThrottleExceptionStart    *string    `json:"throttle_exception_start"`
	ThrottleExceptionThrottle *int64     `json:"throttle_exception_throttle"`
	Type                      string     `json:"type"`
}

func encodeOrganization(o account.Organization) organizationBody {
	b := organizationBody{
		ID:                        o.ID,
		ParentID:                  o.ParentID,
		Name:                      o.Name,
		Slug:                      o.Slug,
		Description:               o.Description,
		Email:                     o.Email,
		Hostname:                  o.Hostname,
		Created:                   formatDateTime(o.Created),
		Active:                    o.Active,
		PrivacyMode:               o.PrivacyMode,
		Throttled:                 o.Throttled,
		BandwidthThrottle:         o.BandwidthThrottle,
		DefaultEncryption:         o.DefaultEncryption,
		EmailServerID:             o.EmailServerID,
		EmailTemplates:            o.EmailTemplates,
		PlanID:                    o.PlanID,
		Policy:                    encodePolicy(o.Policy),
		ShareDisclaimer:           o.ShareDisclaimer,
		SubscriptionUUID:          o.SubscriptionUUID,
		ThrottleExceptionDays:     o.ThrottleExceptionDays,
		ThrottleExceptionDOW:      o.ThrottleExceptionDOW,
		ThrottleExceptionEnd:      o.ThrottleExceptionEnd,
		ThrottleExceptionStart:    o.ThrottleExceptionStart,
		ThrottleExceptionThrottle: o.ThrottleExceptionThrottle,
		Type:                      "organization",
	}
	if o.TrialUntil != nil {
		t := formatDateTime(*o.TrialUntil)
		b.TrialUntil = &t
	}
	return b
}

// licenseKeyBody is the answer of GET /api/2/organization/<id>/license_key.
type licenseKeyBody struct {
	LicenseKey string `json:"license_key"`
	Type       string `json:"type"`
}

// machineBody is the machine object of spec 2.12, every field; null where
// berth knows nothing.
type machineBody struct {
	ID                        uint64  `json:"id"`
	DNSName                   string  `json:"dns_name"`
	GUID                      string  `json:"guid"`
	Created                   string  `json:"created"`
	LastLogin                 *string `json:"last_login"`
	LastDisconnect            *string `json:"last_disconnect"`
	OSType                    string  `json:"os_type"`
	OSVersion                 string  `json:"os_version"`
	AgentVersion              *string `json:"agent_version"`
	BandwidthThrottle         *int64  `json:"bandwidth_throttle"`
	Throttled                 bool    `json:"throttled"`
	ThrottleExceptionDays     *string `json:"throttle_exception_days"`
	ThrottleExceptionDOW      *string `json:"throttle_exception_dow"`
	ThrottleExceptionEnd      *string `json:"throttle_exception_end"`
	ThrottleExceptionStart    *string `json:"throttle_exception_start"`
	ThrottleExceptionThrottle *int64  `json:"throttle_exception_throttle"`
	MachineType               string  `json:"machine_type"`
	HealthReportPeriodMinutes *int64  `json:"health_report_period_minutes"`
	Locked                    bool    `json:"locked"`
	ManualCollisions          *bool   `json:"manual_collisions"`
	Nickname                  *string `json:"nickname"`
	Type                      string  `json:"type"`
}

func encodeMachine(m account.Machine) machineBody {
	return machineBody{
		ID:                        m.ID,
		DNSName:                   m.DNSName,
		GUID:                      m.GUID,
		Created:                   formatDateTime(m.Created),
		LastLogin:                 formatOptional(m.LastLogin),
		LastDisconnect:            formatOptional(m.LastDisconnect),
		OSType:                    m.OSType,
		OSVersion:                 m.OSVersion,
		AgentVersion:              m.AgentVersion,
		BandwidthThrottle:         m.BandwidthThrottle,
		Throttled:                 m.Throttled,
		ThrottleExceptionDays:     m.ThrottleExceptionDays,
		ThrottleExceptionDOW:      m.ThrottleExceptionDOW,
		ThrottleExceptionEnd:      m.ThrottleExceptionEnd,
		ThrottleExceptionStart:    m.ThrottleExceptionStart,
		ThrottleExceptionThrottle: m.ThrottleExceptionThrottle,
		MachineType:               m.MachineType,
		HealthReportPeriodMinutes: m.HealthReportPeriodMinutes,
		Locked:                    m.Locked,
		ManualCollisions:          m.ManualCollisions,
		Nickname:                  m.Nickname,
		Type:                      "machine",
	}
}

func formatOptional(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := formatDateTime(*t)
	return &s
}

// organization returns the organization of the path's {org} id if the
// caller may do act with it (share decides). An {org} that is not an id
// is no organization.
func (s *server) organization(r *http.Request, act share.OrgAction) (account.Organization, error) {
	id, ok := parseID(r.PathValue("org"))
	if !ok {
		return account.Organization{}, share.ErrNotFound
	}
	return s.shares.Organization(r.Context(), callerOf(r), id, act)
}

// getOrganization answers GET /api/2/organization/{id or license key}. A
// license key goes through the same check as an id: one outside the
// caller's sight is 404, as one that does not exist.
func (s *server) getOrganization(r *http.Request) (any, error) {
	ref := r.PathValue("org")
	id, ok := parseID(ref)
	if !ok {
		o, err := s.accounts.OrganizationByLicenseKey(r.Context(), ref)
		if errors.Is(err, account.ErrNotFound) {
			return nil, share.ErrNotFound
		}
		if err != nil {
			return nil, err
		}
		id = o.ID
	}
	o, err := s.shares.Organization(r.Context(), callerOf(r), id, share.OrgRead)
	if err != nil {
		return nil, err
	}
	return encodeOrganization(o), nil
}

// getLicenseKey answers GET /api/2/organization/{id}/license_key (berth's
// route): for the administrators of the organization and of those above
// it. An organization made before berth had keys gets one now.
func (s *server) getLicenseKey(r *http.Request) (any, error) {
	o, err := s.organization(r, share.OrgManage)
	if err != nil {
		return nil, err
	}
	lk, err := s.accounts.LicenseKey(r.Context(), o.ID)
	if err != nil {
		return nil, err
	}
	return licenseKeyBody{LicenseKey: lk, Type: "license_key"}, nil
}

// orgFields are the form fields of organizations/create and update.
type orgFields struct {
	name, slug, description, email, hostname *string
	// trialSet says trial_until was sent; trial is nil for "" (no trial).
	trialSet bool
	trial    *time.Time
	parentID *uint64
}

// readOrgFields reads the organization fields of a form: each one sent
// is set, each one left out is kept.
func readOrgFields(vals url.Values) (orgFields, error) {
	var f orgFields
	for name, dst := range map[string]**string{
		"name": &f.name, "slug": &f.slug, "description": &f.description,
		"email": &f.email, "hostname": &f.hostname,
	} {
		if vs, ok := vals[name]; ok && len(vs) > 0 {
			v := vs[0]
			*dst = &v
		}
	}
	if vs, ok := vals["trial_until"]; ok && len(vs) > 0 {
		f.trialSet = true
		if vs[0] != "" {
			t, err := parseDateTime(vs[0])
			if err != nil {
				return orgFields{}, Describe(err, "trial_until must be formatted YYYY-MM-DDTHH:MM:SS")
			}
			f.trial = &t
		}
	}
	if vs, ok := vals["parent_id"]; ok && len(vs) > 0 {
		id, ok := parseID(vs[0])
		if !ok {
			return orgFields{}, Describe(ErrInvalidRequest, "parent_id: not an organization id")
		}
		f.parentID = &id
	}
	return f, nil
}

func (f orgFields) apply(o *account.Organization) {
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	set(&o.Name, f.name)
	o.Name = strings.TrimSpace(o.Name) // as create trims it
	set(&o.Slug, f.slug)
	set(&o.Description, f.description)
	set(&o.Email, f.email)
	set(&o.Hostname, f.hostname)
	if f.trialSet {
		o.TrialUntil = f.trial
	}
	if f.parentID != nil {
		o.ParentID = *f.parentID
	}
}

// createOrganization answers POST /api/2/organization/{id}/organizations/create:
// a child of {id} with the form's name (required), slug, description,
// email, hostname and trial_until, and its parent's default policy.
func (s *server) createOrganization(r *http.Request) (any, error) {
	parent, err := s.organization(r, share.OrgManage)
	if err != nil {
		return nil, err
	}
	vals, err := form(r)
	if err != nil {
		return nil, err
	}
	if _, err := required(vals, "name"); err != nil {
		return nil, err
	}
	f, err := readOrgFields(vals)
	if err != nil {
		return nil, err
	}
	if f.parentID != nil && *f.parentID != parent.ID {
		return nil, Describe(ErrInvalidRequest, "parent_id: a new organization's parent is the one in the path")
	}
	var o account.Organization
	f.apply(&o)
	o, err = s.accounts.CreateOrganization(r.Context(), account.OrganizationInput{
		ParentID: parent.ID, Name: o.Name, Slug: o.Slug, Description: o.Description,
		Email: o.Email, Hostname: o.Hostname, TrialUntil: o.TrialUntil,
	})
	if err != nil {
		return nil, err
	}
	return encodeOrganization(o), nil
}

// updateOrganization answers POST /api/2/organization/{id}/update: the
// fields of create that the form sends; parent_id may be sent but not
// changed.
func (s *server) updateOrganization(r *http.Request) (any, error) {
	o, err := s.organization(r, share.OrgManage)
	if err != nil {
		return nil, err
	}
	vals, err := form(r)
	if err != nil {
		return nil, err
	}
	f, err := readOrgFields(vals)
	if err != nil {
		return nil, err
	}
	o, err = s.accounts.UpdateOrganization(r.Context(), o.ID, func(o *account.Organization) error {
		f.apply(o)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return encodeOrganization(o), nil
}

// govern returns the path's organization for disable, enable and delete:
// the administrators above it act on it, never its own, and nobody on a
// top-level organization.
func (s *server) govern(r *http.Request) (account.Organization, error) {
	o, err := s.organization(r, share.OrgGovern)
	if err != nil {
		return account.Organization{}, err
	}
	if o.ParentID == 0 {
		return account.Organization{}, &share.Refusal{Reason: "a top-level organization is not disabled, enabled or deleted over the API"}
	}
	return o, nil
}

// disableOrganization answers POST /api/2/organization/{id}/disable with
// {status: ok}. Its persons and guests, and those below it, are refused
// from their next request on.
func (s *server) disableOrganization(r *http.Request) (any, error) {
	o, err := s.govern(r)
	if err != nil {
		return nil, err
	}
	_, err = s.accounts.DisableOrganization(r.Context(), o.ID)
	return nil, err
}

// enableOrganization answers POST /api/2/organization/{id}/enable with
// {status: ok}.
func (s *server) enableOrganization(r *http.Request) (any, error) {
	o, err := s.govern(r)
	if err != nil {
		return nil, err
	}
	_, err = s.accounts.EnableOrganization(r.Context(), o.ID)
	return nil, err
}

// deleteOrganization answers POST /api/2/organization/{id}/delete with
// {status: ok}: the roots of the organization and of every organization
// below it are deleted in vfs (they answer 410 root_deleted), then the
// organization (account). Roots first: a delete that fails halfway is
// retried whole, since the organization is still there to name.
//
// The roots are listed again after the organization's deletion, as a
// person's delete does: a root made while the first ones were deleted
// (roots/create racing this delete) is recorded by then, and goes too,
// so no live root outlives its organization. One recorded later is
// refused (account checks the organization's chain, which the deletion
// wrote).
func (s *server) deleteOrganization(r *http.Request) (any, error) {
	o, err := s.govern(r)
	if err != nil {
		return nil, err
	}
	if err := s.deleteSubtreeRoots(r.Context(), o.ID); err != nil {
		return nil, err
	}
	if _, err := s.accounts.DeleteOrganization(r.Context(), o.ID); err != nil {
		return nil, err
	}
	return nil, s.deleteSubtreeRoots(r.Context(), o.ID)
}

// deleteRootsAtOnce bounds the root deletes one organization delete has
// in flight.
const deleteRootsAtOnce = 16

// deleteSubtreeRoots deletes in vfs every root owned in organization id
// and in its descendants, page by page, depth first. The tree is at most
// account.MaxOrgDepth deep.
func (s *server) deleteSubtreeRoots(ctx context.Context, id uint64) error {
	for off := 0; ; off += MaxPageSize {
		roots, total, err := s.accounts.OrganizationRoots(ctx, id, off, MaxPageSize)
		if err != nil {
			return err
		}
		// Each delete is its own transaction, and each commit waits for
		// the disk: concurrent ones share their syncs.
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(deleteRootsAtOnce)
		for _, ro := range roots {
			g.Go(func() error {
				err := s.fs.DeleteRoot(gctx, ro.RootID)
				if err != nil && !errors.Is(err, vfs.ErrRootDeleted) && !errors.Is(err, vfs.ErrNotExist) {
					return err
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return err
		}
		if off+MaxPageSize >= total {
			break
		}
	}
	for off := 0; ; off += MaxPageSize {
		kids, total, err := s.accounts.ChildOrganizations(ctx, id, off, MaxPageSize)
		if err != nil {
			return err
		}
		for _, k := range kids {
			if err := s.deleteSubtreeRoots(ctx, k.ID); err != nil {
				return err
			}
		}
		if off+MaxPageSize >= total {
			return nil
		}
	}
}

// updatePolicy answers POST /api/2/organization/{id}/policy/update: each
// policy field of spec 2.7 the form sends, by its name there, is set;
// the others are kept.
func (s *server) updatePolicy(r *http.Request) (any, error) {
	o, err := s.organization(r, share.OrgGovern)
	if err != nil {
		return nil, err
	}
	vals, err := form(r)
	if err != nil {
		return nil, err
	}
	var sets []func(*account.Policy)
	for _, f := range policyFields() {
		vs, ok := vals[f.name]
		if !ok || len(vs) == 0 {
			continue
		}
		set, err := f.parse(vs[0])
		if err != nil {
			return nil, Describe(ErrInvalidRequest, "%s: %s", f.name, err.Error())
		}
		sets = append(sets, set)
	}
	o, err = s.accounts.UpdatePolicy(r.Context(), o.ID, func(p *account.Policy) error {
		for _, set := range sets {
			set(p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return encodeOrganization(o), nil
}

// policyField is one form field of policy/update: its spec name and how
// its text becomes a change of the policy.
type policyField struct {
	name  string
	parse func(string) (func(*account.Policy), error)
}

// errFieldValue says what a policy form field should hold; the
// description names the field.
type errFieldValue string

func (e errFieldValue) Error() string { return string(e) }

func boolField(name string, dst func(*account.Policy) *bool) policyField {
	return policyField{name, func(v string) (func(*account.Policy), error) {
		b, ok := parseBool(v)
		if !ok {
			return nil, errFieldValue("must be true or false (or 1 or 0)")
		}
		return func(p *account.Policy) { *dst(p) = b }, nil
	}}
}

func intField(name string, dst func(*account.Policy) *int64) policyField {
	return policyField{name, func(v string) (func(*account.Policy), error) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return nil, errFieldValue("must be a whole number, 0 or more")
		}
		return func(p *account.Policy) { *dst(p) = n }, nil
	}}
}

// stringField takes the text as it is; account validates it.
func stringField(name string, dst func(*account.Policy) *string) policyField {
	return policyField{name, func(v string) (func(*account.Policy), error) {
		return func(p *account.Policy) { *dst(p) = v }, nil
	}}
}

// policyFields are the policy fields a form may set: every field of spec
// 2.7 but company_id, space_quota_formatted and type, which are derived.
func policyFields() []policyField {
	type P = account.Policy
	return []policyField{
		boolField("ad_enabled", func(p *P) *bool { return &p.ADEnabled }),
		boolField("admin_browse_files", func(p *P) *bool { return &p.AdminBrowseFiles }),
		boolField("admin_browse_remote", func(p *P) *bool { return &p.AdminBrowseRemote }),
		boolField("admin_create_users", func(p *P) *bool { return &p.AdminCreateUsers }),
		boolField("backups_enabled", func(p *P) *bool { return &p.BackupsEnabled }),
		boolField("branding_enabled", func(p *P) *bool { return &p.BrandingEnabled }),
		{"change_password_frequency", func(v string) (func(*P), error) {
			return func(p *P) {
				if v == "" {
					p.ChangePasswordFrequency = nil
				} else {
					p.ChangePasswordFrequency = &v
				}
			}, nil
		}},
		stringField("deactivate_token_frequency", func(p *P) *string { return &p.DeactivateTokenFrequency }),
		stringField("excluded_extensions", func(p *P) *string { return &p.ExcludedExtensions }),
		stringField("locked_extensions", func(p *P) *string { return &p.LockedExtensions }),
		boolField("file_server_enabled", func(p *P) *bool { return &p.FileServerEnabled }),
		intField("max_file_size", func(p *P) *int64 { return &p.MaxFileSize }),
		intField("monthly_cost_cents", func(p *P) *int64 { return &p.MonthlyCostCents }),
		{"monthly_cost_currency", func(v string) (func(*P), error) {
			if len(v) != 3 || strings.ToUpper(v) != v || strings.ContainsFunc(v, func(r rune) bool { return r < 'A' || r > 'Z' }) {
				return nil, errFieldValue("must be an ISO 4217 code such as USD")
			}
			return func(p *P) { p.MonthlyCostCurrency = v }, nil
		}},
		intField("num_orgs_maximum", func(p *P) *int64 { return &p.NumOrgsMaximum }),
		intField("num_users_maximum", func(p *P) *int64 { return &p.NumUsersMaximum }),
		intField("num_users_minimum", func(p *P) *int64 { return &p.NumUsersMinimum }),
		boolField("psa_enabled", func(p *P) *bool { return &p.PSAEnabled }),
		boolField("purge_deleted", func(p *P) *bool { return &p.PurgeDeleted }),
		stringField("purge_deleted_frequency", func(p *P) *string { return &p.PurgeDeletedFrequency }),
		boolField("require_mobile_lock", func(p *P) *bool { return &p.RequireMobileLock }),
		boolField("require_two_step_auth", func(p *P) *bool { return &p.RequireTwoStepAuth }),
		boolField("secure_shares", func(p *P) *bool { return &p.SecureShares }),
		boolField("service_plans_enabled", func(p *P) *bool { return &p.ServicePlansEnabled }),
		stringField("space_quota", func(p *P) *string { return &p.SpaceQuota }),
		intField("trial_length_days", func(p *P) *int64 { return &p.TrialLengthDays }),
		boolField("trim_revisions", func(p *P) *bool { return &p.TrimRevisions }),
		stringField("trim_revisions_x", func(p *P) *string { return &p.TrimRevisionsX }),
		boolField("user_create_backups", func(p *P) *bool { return &p.UserCreateBackups }),
		boolField("user_create_shares", func(p *P) *bool { return &p.UserCreateShares }),
		boolField("user_lock_files", func(p *P) *bool { return &p.UserLockFiles }),
		boolField("user_purge_deleted", func(p *P) *bool { return &p.UserPurgeDeleted }),
		boolField("user_trim_revisions", func(p *P) *bool { return &p.UserTrimRevisions }),
		boolField("webdav_enabled", func(p *P) *bool { return &p.WebDAVEnabled }),
	}
}

// listOrganizations answers GET /api/2/organization/{id}/organizations:
// its direct children, paged, in id order.
func (s *server) listOrganizations(r *http.Request) (any, error) {
	o, p, err := s.orgPage(r)
	if err != nil {
		return nil, err
	}
	kids, total, err := s.accounts.ChildOrganizations(r.Context(), o.ID, p.Offset, p.Limit)
	if err != nil {
		return nil, err
	}
	out := make([]organizationBody, 0, len(kids))
	for _, k := range kids {
		out = append(out, encodeOrganization(k))
	}
	return paged(p, out, total), nil
}

// orgPage is the path's organization, which the caller must manage, and
// the request's page.
func (s *server) orgPage(r *http.Request) (account.Organization, page, error) {
	o, err := s.organization(r, share.OrgManage)
	if err != nil {
		return account.Organization{}, page{}, err
	}
	p, err := pageOf(r)
	return o, p, err
}

// listOrganizationRoots answers GET /api/2/organization/{id}/roots: the
// roots owned in the organization itself (by its persons, or shares),
// paged in id order, with the caller's permissions on each ([] for a root
// the caller may not open). A deleted root is left out of the page but
// counted in total (vfs keeps it until it is purged).
func (s *server) listOrganizationRoots(r *http.Request) (any, error) {
	o, p, err := s.orgPage(r)
	if err != nil {
		return nil, err
	}
	owners, total, err := s.accounts.OrganizationRoots(r.Context(), o.ID, p.Offset, p.Limit)
	if err != nil {
		return nil, err
	}
	out := make([]rootJSON, 0, len(owners))
	for _, ow := range owners {
		rj, err := s.orgRoot(r.Context(), callerOf(r), ow.RootID)
		if errors.Is(err, vfs.ErrRootDeleted) || errors.Is(err, vfs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, rj)
	}
	return paged(p, out, total), nil
}

// orgRoot is the root object of root id as c sees it from an
// organization c manages: c's own permissions on it.
func (s *server) orgRoot(ctx context.Context, c caller, id uint64) (rootJSON, error) {
	root, err := s.fs.Root(ctx, id)
	if err != nil {
		return rootJSON{}, err
	}
	u, err := s.fs.Usage(ctx, id)
	if err != nil {
		return rootJSON{}, err
	}
	perms := []string{}
	a, err := s.shares.Root(ctx, c, id)
	switch {
	case err == nil:
		perms = permissions(a.Perms)
	case !errors.Is(err, share.ErrNoRoot):
		return rootJSON{}, err
	}
	return encodeRoot(root, u, perms), nil
}

// getOrganizationRoot answers GET /api/2/organization/{id}/root/{root_id}:
// a root owned in that organization itself, else 404; a deleted one is
// 410 root_deleted.
func (s *server) getOrganizationRoot(r *http.Request) (any, error) {
	o, err := s.organization(r, share.OrgManage)
	if err != nil {
		return nil, err
	}
	id, ok := parseID(r.PathValue("root_id"))
	if !ok {
		return nil, share.ErrNoRoot
	}
	ow, err := s.accounts.RootOwnerOf(r.Context(), id)
	if errors.Is(err, account.ErrNotFound) || (err == nil && ow.OrganizationID != o.ID) {
		return nil, share.ErrNoRoot
	}
	if err != nil {
		return nil, err
	}
	return s.orgRoot(r.Context(), callerOf(r), id)
}

// listOrganizationMachines answers GET /api/2/organization/{id}/machines:
// the machines of its persons and guests, paged in id order.
func (s *server) listOrganizationMachines(r *http.Request) (any, error) {
	o, p, err := s.orgPage(r)
	if err != nil {
		return nil, err
	}
	ms, total, err := s.accounts.OrganizationMachines(r.Context(), o.ID, p.Offset, p.Limit)
	if err != nil {
		return nil, err
	}
	out := make([]machineBody, 0, len(ms))
	for _, m := range ms {
		out = append(out, encodeMachine(m))
	}
	return paged(p, out, total), nil
}
