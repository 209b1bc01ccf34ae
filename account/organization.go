package account

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"berth/kv"
)

// Organization is a tenant (spec 2.6). Organizations form a tree through
// ParentID. Fields the spec shows only as null in samples, with no type,
// are pointers: nil is null, and their value types are berth's choice.
type Organization struct {
	ID          uint64     `cbor:"1,keyasint"`
	ParentID    uint64     `cbor:"2,keyasint"` // 0: top-level
	Name        string     `cbor:"3,keyasint"`
	Slug        string     `cbor:"4,keyasint"` // URL-friendly name; derived from Name when not given
	Description string     `cbor:"5,keyasint"`
	Email       string     `cbor:"6,keyasint"` // contact address
	Hostname    string     `cbor:"7,keyasint"` // host the organization's agents connect to
	Created     time.Time  `cbor:"8,keyasint"`
	Active      bool       `cbor:"9,keyasint"`  // false: disabled; its persons cannot log in (ErrInactive)
	TrialUntil  *time.Time `cbor:"10,keyasint"` // nil: no trial
	PrivacyMode bool       `cbor:"11,keyasint"`
	Throttled   bool       `cbor:"12,keyasint"`
	// BandwidthThrottle in bytes per second (berth's choice of type).
	BandwidthThrottle *int64  `cbor:"13,keyasint"`
	DefaultEncryption int64   `cbor:"14,keyasint"`
	EmailServerID     *uint64 `cbor:"15,keyasint"`
	EmailTemplates    bool    `cbor:"16,keyasint"`
	PlanID            *uint64 `cbor:"17,keyasint"`
	Policy            Policy  `cbor:"18,keyasint"`
	ShareDisclaimer   *string `cbor:"19,keyasint"`
	SubscriptionUUID  *string `cbor:"20,keyasint"`
	// Throttle exception schedule (berth's choice of types): Days and DOW
	// as comma-separated lists, Start and End as "HH:MM", Throttle in
	// bytes per second.
	ThrottleExceptionDays     *string `cbor:"21,keyasint"`
	ThrottleExceptionDOW      *string `cbor:"22,keyasint"`
	ThrottleExceptionEnd      *string `cbor:"23,keyasint"`
	ThrottleExceptionStart    *string `cbor:"24,keyasint"`
	ThrottleExceptionThrottle *int64  `cbor:"25,keyasint"`
	// Deleted organizations stay stored, so that their roots can answer
	// 410 root_deleted and their ids are never reused; nobody in them
	// or below them signs in (ErrInactive).
	Deleted bool `cbor:"26,keyasint"`
	// LicenseKey names the organization in GET /api/2/organization/<key>
	// (spec 4.6); its form is berth's choice (NewLicenseKey). "" for an
	// organization made before keys existed: LicenseKey gives it one.
	LicenseKey string `cbor:"27,keyasint"`
	// SessionsFrom is when the organization was last enabled again
	// after a disabling: the sessions of its persons, and of persons
	// of organizations below it, that began before then are ended, as
	// enabling a person ends theirs. A stamp, not a sweep of the
	// subtree's sessions, so that enabling a large organization is one
	// small write. A session begun after it is stamped after it, even
	// by a node whose clock is behind (issueTokens). Zero: never
	// enabled again.
	SessionsFrom time.Time `cbor:"28,keyasint,omitempty"`
}

// Policy holds an organization's access control, limits and settings
// (spec 2.7). Its defaults are DefaultPolicy's.
type Policy struct {
	CompanyID uint64 `cbor:"1,keyasint"` // the organization's id; set by the Service

	ADEnabled         bool `cbor:"2,keyasint"` // default false
	AdminBrowseFiles  bool `cbor:"3,keyasint"` // default false: admins do not see users' files
	AdminBrowseRemote bool `cbor:"4,keyasint"` // default false
	AdminCreateUsers  bool `cbor:"5,keyasint"` // default true
	BackupsEnabled    bool `cbor:"6,keyasint"` // default true
	BrandingEnabled   bool `cbor:"7,keyasint"` // default false
	// ChangePasswordFrequency: null in samples, format not shown. berth
	// stores a Go duration string ("720h"); nil means never (default).
	ChangePasswordFrequency *string `cbor:"8,keyasint"`
	// DeactivateTokenFrequency: format not shown; berth stores a Go
	// duration string ("720h"), "" meaning never (default; "0" is taken
	// as ""). A session, one sign-in and the refreshes that carry it on,
	// ends this long after the sign-in: its tokens are refused at their
	// next use and the person signs in again. DeactivateTokenAfter
	// parses it.
	DeactivateTokenFrequency string `cbor:"9,keyasint"`
	// ExcludedExtensions: comma-separated, each with a leading dot
	// (".exe,.tmp"), compared case-insensitively; uploads of these are
	// refused. Default "" (none).
	ExcludedExtensions string `cbor:"10,keyasint"`
	// LockedExtensions: same format. Default "".
	LockedExtensions  string `cbor:"11,keyasint"`
	FileServerEnabled bool   `cbor:"12,keyasint"` // default false
	// MaxFileSize in bytes (the spec does not give the unit); 0 means
	// unlimited (default).
	MaxFileSize         int64  `cbor:"13,keyasint"`
	MonthlyCostCents    int64  `cbor:"14,keyasint"` // default 0
	MonthlyCostCurrency string `cbor:"15,keyasint"` // ISO 4217 code, default "USD"
	NumOrgsMaximum      int64  `cbor:"16,keyasint"` // 0: unlimited (default)
	NumUsersMaximum     int64  `cbor:"17,keyasint"` // 0: unlimited (default)
	NumUsersMinimum     int64  `cbor:"18,keyasint"` // default 0
	PSAEnabled          bool   `cbor:"19,keyasint"` // default false
	PurgeDeleted        bool   `cbor:"20,keyasint"` // default false: deleted files stay restorable
	// PurgeDeletedFrequency: format not shown; Go duration string, "" when
	// PurgeDeleted is off (default).
	PurgeDeletedFrequency string `cbor:"21,keyasint"`
	RequireMobileLock     bool   `cbor:"22,keyasint"` // default false
	RequireTwoStepAuth    bool   `cbor:"23,keyasint"` // default false
	SecureShares          bool   `cbor:"24,keyasint"` // default false
	ServicePlansEnabled   bool   `cbor:"25,keyasint"` // default false
	// SpaceQuota in bytes as decimal digits (the spec's sample is a
	// string); "0" means unlimited (default). SpaceQuotaBytes parses it.
	SpaceQuota      string `cbor:"26,keyasint"`
	TrialLengthDays int64  `cbor:"27,keyasint"` // default 0: no trial
	TrimRevisions   bool   `cbor:"28,keyasint"` // default false: all revisions kept
	// TrimRevisionsX: format not shown; berth stores the number of
	// revisions to keep as digits, "" when TrimRevisions is off (default).
	TrimRevisionsX    string `cbor:"29,keyasint"`
	UserCreateBackups bool   `cbor:"30,keyasint"` // default true
	UserCreateShares  bool   `cbor:"31,keyasint"` // default true
	UserLockFiles     bool   `cbor:"32,keyasint"` // default true
	UserPurgeDeleted  bool   `cbor:"33,keyasint"` // default true
	UserTrimRevisions bool   `cbor:"34,keyasint"` // default true
	WebDAVEnabled     bool   `cbor:"35,keyasint"` // default true
}

// DefaultPolicy is what a new organization gets when no policy is given:
// what a self-hosted file service would ship. Users may do everything to
// their own files (share, lock, purge, trim, back up, WebDAV); there are no
// size, quota, extension or user-count limits; administrators cannot
// browse users' files; deleted files and revisions are kept until a user
// purges them.
func DefaultPolicy() Policy {
	return Policy{
		AdminCreateUsers:    true,
		BackupsEnabled:      true,
		MonthlyCostCurrency: "USD",
		SpaceQuota:          "0",
		UserCreateBackups:   true,
		UserCreateShares:    true,
		UserLockFiles:       true,
		UserPurgeDeleted:    true,
		UserTrimRevisions:   true,
		WebDAVEnabled:       true,
	}
}

// SpaceQuotaBytes returns SpaceQuota as a number of bytes; 0 means unlimited.
func (p Policy) SpaceQuotaBytes() int64 {
	n, err := strconv.ParseInt(p.SpaceQuota, 10, 64)
	if err != nil || n < 0 {
		return 0 // validate refuses such values; unreachable for stored policies
	}
	return n
}

// DeactivateTokenAfter returns DeactivateTokenFrequency as a duration: how
// long after its sign-in a session ends. 0 means never.
func (p Policy) DeactivateTokenAfter() time.Duration {
	d, err := time.ParseDuration(p.DeactivateTokenFrequency)
	if err != nil || d < 0 {
		return 0 // "" (never); validate refuses the rest
	}
	return d
}

// ExtensionExcluded reports whether name ends in one of ExcludedExtensions,
// case-insensitively.
func (p Policy) ExtensionExcluded(name string) bool {
	return extensionIn(p.ExcludedExtensions, name)
}

// ExcludedExtensionList is ExcludedExtensions as a list of entries.
func (p Policy) ExcludedExtensionList() []string {
	var out []string
	for e := range strings.SplitSeq(p.ExcludedExtensions, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// ExtensionLocked reports whether name ends in one of LockedExtensions.
func (p Policy) ExtensionLocked(name string) bool {
	return extensionIn(p.LockedExtensions, name)
}

// extensionIn reports whether name, or the name a Windows client stores
// it under (windowsName), ends in one of the comma-separated extensions
// of list, compared without case. A name that is only the extension is
// not in it.
func extensionIn(list, name string) bool {
	if list == "" {
		return false
	}
	if w := windowsName(name); w != name && extensionAs(list, w) {
		return true
	}
	return extensionAs(list, name)
}

// windowsName is the name of the file Windows writes for name: up to a
// colon (NTFS names a stream of the file after it, "::$DATA" its
// contents), without the dots and spaces at its end, which Win32 drops.
// "report.pdf." and "report.pdf::$DATA" passed locked_extensions' ".pdf"
// and became report.pdf on every Windows machine that synced them. vfs
// applies the same rule to excluded_extensions (vfs/names.go); account
// may not import vfs (DESIGN.md).
func windowsName(name string) string {
	if i := strings.IndexByte(name, ':'); i >= 0 {
		name = name[:i]
	}
	return strings.TrimRight(name, ". ")
}

func extensionAs(list, name string) bool {
	lname := strings.ToLower(name)
	for ext := range strings.SplitSeq(list, ",") {
		ext = strings.ToLower(strings.TrimSpace(ext))
		if ext != "" && strings.HasSuffix(lname, ext) && len(lname) > len(ext) {
			return true
		}
	}
	return false
}

func (p *Policy) validate() error {
	if p.MaxFileSize < 0 {
		return invalid("max_file_size", "negative")
	}
	if p.SpaceQuota == "" {
		p.SpaceQuota = "0"
	}
	if n, err := strconv.ParseInt(p.SpaceQuota, 10, 64); err != nil || n < 0 || strings.TrimLeft(p.SpaceQuota, "0123456789") != "" {
		return invalid("space_quota", "not a number of bytes")
	}
	for _, f := range []struct {
		name string
		v    string
	}{{"excluded_extensions", p.ExcludedExtensions}, {"locked_extensions", p.LockedExtensions}} {
		if err := validateExtensions(f.name, f.v); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"num_orgs_maximum", p.NumOrgsMaximum}, {"num_users_maximum", p.NumUsersMaximum},
		{"num_users_minimum", p.NumUsersMinimum}, {"monthly_cost_cents", p.MonthlyCostCents},
		{"trial_length_days", p.TrialLengthDays}} {
		if f.v < 0 {
			return invalid(f.name, "negative")
		}
	}
	if p.NumUsersMaximum > 0 && p.NumUsersMinimum > p.NumUsersMaximum {
		return invalid("num_users_minimum", "greater than num_users_maximum")
	}
	if d, err := time.ParseDuration(p.DeactivateTokenFrequency); err == nil && d == 0 {
		// "0" reads as "never", like space_quota's "0" (unlimited); one
		// stored form for it.
		p.DeactivateTokenFrequency = ""
	}
	for _, f := range []struct {
		name string
		v    *string
	}{{"change_password_frequency", p.ChangePasswordFrequency},
		{"deactivate_token_frequency", &p.DeactivateTokenFrequency},
		{"purge_deleted_frequency", &p.PurgeDeletedFrequency}} {
		if f.v == nil || *f.v == "" {
			continue
		}
		if d, err := time.ParseDuration(*f.v); err != nil || d <= 0 {
			return invalid(f.name, "not a positive duration such as 720h")
		}
	}
	if p.TrimRevisionsX != "" {
		if n, err := strconv.ParseUint(p.TrimRevisionsX, 10, 32); err != nil || n == 0 {
			return invalid("trim_revisions_x", "not a positive number of revisions")
		}
	}
	return nil
}

func validateExtensions(field, list string) error {
	if list == "" {
		return nil
	}
	for ext := range strings.SplitSeq(list, ",") {
		ext = strings.TrimSpace(ext)
		if len(ext) < 2 || ext[0] != '.' || strings.ContainsAny(ext[1:], "./\\") {
			return invalid(field, fmt.Sprintf("%q is not an extension with a leading dot", ext))
		}
	}
	return nil
}

// OrganizationInput are the fields a caller sets when creating an
// organization. Policy nil means DefaultPolicy().
type OrganizationInput struct {
	ParentID    uint64 // 0: top-level; otherwise an existing organization
	Name        string // required
	Slug        string // "" derives it from Name
	Description string
	Email       string // "" or a plain address
	Hostname    string
	TrialUntil  *time.Time
	Policy      *Policy
}

// CreateOrganization stores a new active organization. Errors: ErrInvalid
// (a *FieldError), including for a ParentID that does not exist.
func (s *Service) CreateOrganization(ctx context.Context, in OrganizationInput) (Organization, error) {
	org, err := s.newOrganization(ctx, in)
	if err != nil {
		return Organization{}, err
	}
	err = s.db.Update(ctx, func(tx kv.Txn) error {
		if err := s.insertOrganization(tx, &org); err != nil {
			return err
		}
		return s.record(ctx, tx, orgChange(ActOrganizationCreated, org))
	})
	if err != nil {
		return Organization{}, err
	}
	return org, nil
}

// newOrganization builds and validates the organization in describes and
// gives it an id; insertOrganization stores it.
func (s *Service) newOrganization(ctx context.Context, in OrganizationInput) (Organization, error) {
	org := Organization{
		ParentID:    in.ParentID,
		Name:        strings.TrimSpace(in.Name),
		Slug:        in.Slug,
		Description: in.Description,
		Email:       in.Email,
		Hostname:    in.Hostname,
		Created:     s.now(),
		Active:      true,
		TrialUntil:  in.TrialUntil,
		Policy:      DefaultPolicy(),
	}
	if in.Policy != nil {
		org.Policy = *in.Policy
	}
	if org.Slug == "" {
		org.Slug = slugify(org.Name)
		if org.Slug == "" {
			org.Slug = "org" // a name with no a-z or 0-9 at all
		}
	}
	if err := org.validate(); err != nil {
		return Organization{}, err
	}
	lk, err := NewLicenseKey()
	if err != nil {
		return Organization{}, err
	}
	org.LicenseKey = lk
	id, err := s.db.NextID(ctx, seqOrg)
	if err != nil {
		return Organization{}, err
	}
	org.ID, org.Policy.CompanyID = id, id
	return org, nil
}

// insertOrganization stores org, built by newOrganization, in tx: under
// a live parent with room for another child (num_orgs_maximum), no
// deeper than MaxOrgDepth, with the parent's child index and the counts
// of every ancestor.
func (s *Service) insertOrganization(tx kv.Txn, org *Organization) error {
	var chain []uint64
	if org.ParentID != 0 {
		parents, err := s.chain(tx, org.ParentID, invalid("parent_id", "no such organization"))
		if err != nil {
			return err
		}
		if err := live(parents); err != nil {
			return invalid("parent_id", "the organization or one above it is disabled or deleted")
		}
		if len(parents) >= MaxOrgDepth {
			return invalid("parent_id", fmt.Sprintf("organizations nest at most %d deep", MaxOrgDepth))
		}
		// num_orgs_maximum bounds every organization below, at any
		// depth, as num_users_maximum does: the administrators of a
		// child set the policies of the organizations they make, so a
		// bound on direct children alone would be lifted by nesting.
		for _, o := range parents {
			max := o.Policy.NumOrgsMaximum
			if max <= 0 {
				continue
			}
			cr, err := s.loadCounts(tx, o.ID, false)
			if err != nil {
				return err
			}
			if cr.Subtree.Organizations >= max {
				return fmt.Errorf("%w: organization %d holds its maximum of %d organizations below it", ErrOrgLimitExceeded, o.ID, max)
			}
		}
		chain = chainIDs(parents)
		if err := tx.Set(key(pfxOrgChild, org.ParentID, org.ID), nil); err != nil {
			return err
		}
		if err := s.count(tx, chain, Counts{Organizations: 1}, 1); err != nil {
			return err
		}
	}
	if err := s.putLicenseKey(tx, org); err != nil {
		return err
	}
	return s.put(tx, key(pfxOrg, org.ID), org)
}

// Bootstrap creates the first organization and its first person (the
// administrator) in one transaction, so that an interrupted first start
// leaves either both or neither: an organization without anyone able to
// log in would look set up to every later start. It fails with ErrExists
// when an organization exists already. Other errors as CreateOrganization
// and CreatePerson.
func (s *Service) Bootstrap(ctx context.Context, org OrganizationInput, admin PersonInput) (Organization, Person, error) {
	o, err := s.newOrganization(ctx, org)
	if err != nil {
		return Organization{}, Person{}, err
	}
	admin.OrganizationID = o.ID
	p, err := s.newPerson(ctx, admin)
	if err != nil {
		return Organization{}, Person{}, err
	}
	err = s.db.Update(ctx, func(tx kv.Txn) error {
		found := false
		err := tx.Scan([]byte(pfxOrg), nil, func(_, _ []byte) error {
			found = true
			return kv.ErrStop
		})
		if err != nil {
			return err
		}
		if found {
			return fmt.Errorf("%w: an organization exists already", ErrExists)
		}
		if err := s.insertOrganization(tx, &o); err != nil {
			return err
		}
		if err := s.record(ctx, tx, orgChange(ActOrganizationCreated, o)); err != nil {
			return err
		}
		if err := s.insertPerson(tx, &p); err != nil {
			return err
		}
		// The administrator's creation is a change like any person's:
		// without its record the log began with an organization that
		// nobody was created in.
		return s.record(ctx, tx, personChange(ActPersonCreated, p))
	})
	if err != nil {
		return Organization{}, Person{}, err
	}
	return o, p, nil
}

// Organization returns the organization with id, or ErrNotFound.
func (s *Service) Organization(ctx context.Context, id uint64) (Organization, error) {
	var org Organization
	err := s.db.View(ctx, func(tx kv.Txn) error {
		return s.get(tx, key(pfxOrg, id), &org, notFoundf("organization %d", id))
	})
	return org, err
}

// HasOrganizations reports whether any organization exists (the daemon
// bootstraps the first organization and administrator when none does).
func (s *Service) HasOrganizations(ctx context.Context) (bool, error) {
	found := false
	err := s.db.View(ctx, func(tx kv.Txn) error {
		return tx.Scan([]byte(pfxOrg), nil, func(_, _ []byte) error {
			found = true
			return kv.ErrStop
		})
	})
	return found, err
}

// UpdateOrganization applies fn to the stored organization and stores the
// result in one transaction, recorded as ActOrganizationUpdated with the
// names of the changed fields. fn may run more than once (on a
// transaction conflict), so it must only change the value it is given.
// ID, ParentID, Created, Deleted, LicenseKey and Policy.CompanyID cannot
// be changed; the API changes Active and the policy through
// DisableOrganization, EnableOrganization and UpdatePolicy, which record
// their own activities. Errors:
// ErrNotFound (also for a deleted organization), ErrInvalid, or fn's own
// error.
func (s *Service) UpdateOrganization(ctx context.Context, id uint64, fn func(*Organization) error) (Organization, error) {
	return s.changeOrganization(ctx, id, ActOrganizationUpdated, func(tx kv.Txn, cur Organization, org *Organization) error {
		if err := fn(org); err != nil {
			return err
		}
		if org.ParentID != cur.ParentID {
			// Usage ledgers and counts follow the tree as it was when
			// each root and person was made; a move would leave them
			// counted under the old parent.
			return invalid("parent_id", "an organization cannot move to another parent")
		}
		return nil
	})
}

// UpdatePolicy applies fn to the organization's policy in one transaction
// and returns the updated organization (spec 4.6 policy/update), recorded
// as ActPolicyUpdated with the names of the changed fields. fn may run
// more than once. Errors: ErrNotFound, ErrInvalid, or fn's own error.
func (s *Service) UpdatePolicy(ctx context.Context, orgID uint64, fn func(*Policy) error) (Organization, error) {
	return s.changeOrganization(ctx, orgID, ActPolicyUpdated, func(_ kv.Txn, _ Organization, o *Organization) error {
		return fn(&o.Policy)
	})
}

// DisableOrganization disables organization id: nobody in it or below it
// signs in, and their tokens and WebDAV credentials are refused from the
// next request on (the chain check of every caller). Enabling it again
// ends the sessions begun before (SessionsFrom). Disabling a disabled
// organization changes nothing and records nothing. Errors: ErrNotFound.
func (s *Service) DisableOrganization(ctx context.Context, id uint64) (Organization, error) {
	return s.setActive(ctx, id, false, ActOrganizationDisabled)
}

// EnableOrganization undoes DisableOrganization. Errors: ErrNotFound.
func (s *Service) EnableOrganization(ctx context.Context, id uint64) (Organization, error) {
	return s.setActive(ctx, id, true, ActOrganizationEnabled)
}

func (s *Service) setActive(ctx context.Context, id uint64, active bool, activity string) (Organization, error) {
	return s.changeOrganization(ctx, id, activity, func(_ kv.Txn, cur Organization, o *Organization) error {
		if cur.Active == active {
			return errUnchanged
		}
		o.Active = active
		return nil
	})
}

// DeleteOrganization deletes organization id (spec 4.6 delete): it stays
// stored, marked Deleted, so that nobody in it or below it signs in and
// its id is never reused; Active keeps its value. It leaves its parent's
// list of organizations and counts (num_orgs_maximum has a free place
// again, and its persons no longer count toward its ancestors'
// num_users_maximum); its own subtree keeps its counts. Its roots and
// those of its descendants are the caller's to delete in vfs (account
// does not know vfs; OrganizationRoots and ChildOrganizations page
// through them). A top-level organization cannot be deleted.
// Errors: ErrNotFound (no such organization, or deleted already), ErrInvalid.
func (s *Service) DeleteOrganization(ctx context.Context, id uint64) (Organization, error) {
	return s.changeOrganization(ctx, id, ActOrganizationDeleted, func(tx kv.Txn, cur Organization, o *Organization) error {
		if cur.ParentID == 0 {
			return invalid("id", "a top-level organization cannot be deleted")
		}
		o.Deleted = true
		parents, err := s.chain(tx, cur.ParentID, notFoundf("organization %d", cur.ParentID))
		if err != nil {
			return err
		}
		cr, err := s.loadCounts(tx, cur.ID, false)
		if err != nil {
			return err
		}
		// Detach the subtree's counts from every ancestor: what it holds
		// (cr.Subtree) and the organization itself.
		gone := cr.Subtree
		gone.Organizations++
		for i, p := range parents {
			pc, err := s.loadCounts(tx, p.ID, false)
			if err != nil {
				return err
			}
			if i == 0 {
				pc.Direct.Organizations--
			}
			pc.Subtree.add(gone, -1)
			if err := s.put(tx, key(pfxCount, p.ID), &pc); err != nil {
				return err
			}
			if p.Deleted {
				break // detached from those above already (as countIn)
			}
		}
		return tx.Delete(key(pfxOrgChild, cur.ParentID, cur.ID))
	})
}

// errUnchanged stops changeOrganization without storing or recording:
// the change asked for is the state already.
var errUnchanged = errors.New("account: unchanged")

// changeOrganization is every change of a stored organization: it reads
// it, lets fn change a copy (fn may run more than once), keeps the fields
// nobody changes, validates, stores, and records activity with the names
// of the fields that changed. A deleted organization is ErrNotFound.
func (s *Service) changeOrganization(ctx context.Context, id uint64, activity string, fn func(tx kv.Txn, cur Organization, o *Organization) error) (Organization, error) {
	var org Organization
	err := s.db.Update(ctx, func(tx kv.Txn) error {
		var cur Organization
		if err := s.get(tx, key(pfxOrg, id), &cur, notFoundf("organization %d", id)); err != nil {
			return err
		}
		if cur.Deleted {
			return notFoundf("organization %d (deleted)", id)
		}
		org = cur
		if err := fn(tx, cur, &org); err != nil {
			return err
		}
		org.ID, org.Created, org.Policy.CompanyID, org.LicenseKey = cur.ID, cur.Created, cur.ID, cur.LicenseKey
		org.SessionsFrom = cur.SessionsFrom
		// Enabled again: the sessions from before end, as a person's
		// do (updateAccount); while it was disabled they were refused
		// as disabled, which said why.
		if !cur.Active && org.Active {
			org.SessionsFrom = s.now()
		}
		if activity != ActOrganizationDeleted {
			org.Deleted = cur.Deleted
		}
		if err := org.validate(); err != nil {
			return err
		}
		if err := s.put(tx, key(pfxOrg, id), &org); err != nil {
			return err
		}
		c := orgChange(activity, org)
		if activity == ActOrganizationUpdated || activity == ActPolicyUpdated {
			c.Data = strings.Join(changedFields(cur, org), ",")
			if c.Data == "" {
				return nil // nothing changed: nothing to record
			}
		}
		return s.record(ctx, tx, c)
	})
	if errors.Is(err, errUnchanged) {
		return org, nil
	}
	if err != nil {
		return Organization{}, err
	}
	return org, nil
}

func (o *Organization) validate() error {
	if o.Name == "" {
		return invalid("name", "required")
	}
	if len(o.Name) > 255 || hasControl(o.Name) {
		return invalid("name", "longer than 255 bytes or has control characters")
	}
	if o.Slug == "" || len(o.Slug) > 64 || slugify(o.Slug) != o.Slug {
		return invalid("slug", "must be 1 to 64 of a-z, 0-9 and -")
	}
	if o.Email != "" {
		if err := validateEmail(o.Email); err != nil {
			return err
		}
	}
	if hasControl(o.Hostname) || strings.ContainsAny(o.Hostname, " /") {
		return invalid("hostname", "not a host name")
	}
	// Free text may hold line breaks, but not invalid UTF-8: the store's
	// decoder refuses it, and a description of "\xff" was stored, after
	// which every request that read the organization (a sign-in of any of
	// its persons, WebDAV, its listings) failed, 500, for good.
	for _, f := range []struct {
		name string
		v    *string
	}{{"description", &o.Description}, {"share_disclaimer", o.ShareDisclaimer},
		{"subscription_uuid", o.SubscriptionUUID}, {"throttle_exception_days", o.ThrottleExceptionDays},
		{"throttle_exception_dow", o.ThrottleExceptionDOW}, {"throttle_exception_end", o.ThrottleExceptionEnd},
		{"throttle_exception_start", o.ThrottleExceptionStart},
		{"monthly_cost_currency", &o.Policy.MonthlyCostCurrency}, {"trim_revisions_x", &o.Policy.TrimRevisionsX},
		{"excluded_extensions", &o.Policy.ExcludedExtensions}, {"locked_extensions", &o.Policy.LockedExtensions}} {
		if f.v != nil && !utf8.ValidString(*f.v) {
			return invalid(f.name, "not valid UTF-8")
		}
	}
	return o.Policy.validate()
}

// slugify lowercases s and turns each run of other characters than a-z
// and 0-9 into one "-".
func slugify(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
		} else {
			dash = true
		}
	}
	out := b.String()
	if len(out) > 64 {
		out = strings.TrimRight(out[:64], "-")
	}
	return out
}

// hasControl reports whether s, a text a client gives, has a control
// character or is not valid UTF-8, so that it may not be stored: CBOR
// text holds UTF-8 only, and a record holding anything else was written
// but never read back (a machine mapping of path %FF failed every read
// of it).
func hasControl(s string) bool {
	return !utf8.ValidString(s) || strings.ContainsFunc(s, unicode.IsControl)
}

func validateEmail(addr string) error {
	a, err := mail.ParseAddress(addr)
	if err != nil || a.Address != addr || len(addr) > 254 {
		return invalid("email", "not a plain e-mail address")
	}
	return nil
}

// changedFields names the fields that differ between a and b, as the
// spec spells them (2.6; a policy field as "policy.<name>", 2.7), for
// the activity record's data_text.
func changedFields(a, b Organization) []string {
	var out []string
	diffFields(reflect.ValueOf(a), reflect.ValueOf(b), "", &out)
	return out
}

func diffFields(a, b reflect.Value, prefix string, out *[]string) {
	t := a.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Type == reflect.TypeFor[Policy]() {
			diffFields(a.Field(i), b.Field(i), "policy.", out)
			continue
		}
		if !reflect.DeepEqual(a.Field(i).Interface(), b.Field(i).Interface()) {
			*out = append(*out, prefix+snakeCase(f.Name))
		}
	}
}

// snakeCase spells a Go field name as the spec spells the field:
// "ADEnabled" is "ad_enabled", "TrimRevisionsX" "trim_revisions_x".
func snakeCase(name string) string {
	if name == "WebDAVEnabled" {
		return "webdav_enabled"
	}
	var b strings.Builder
	rs := []rune(name)
	for i, r := range rs {
		upper := unicode.IsUpper(r)
		if upper && i > 0 && (!unicode.IsUpper(rs[i-1]) || i+1 < len(rs) && unicode.IsLower(rs[i+1])) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// Binds reports whether the policy's user_* switches (user_lock_files,
// user_purge_deleted, user_trim_revisions, user_create_backups) and its
// locked_extensions bind person pe, where place is the chain of the
// organization whose policy it is, that organization first
// (RootPlace.Chain; Caller.Chain for the person's own). They bind
// persons and guests; the administrators of that organization and of
// those above it, who govern it, are not held by it, so they can still
// lock, replace or remove what it protects from everyone else. An
// administrator of any other organization is bound like a person: a
// child organization's administrator in a share of its parent
// administers nothing there, and was let past the share's
// locked_extensions and user_lock_files.
func (p Policy) Binds(pe Person, place []uint64) bool {
	return !pe.Admin || pe.Guest || !Within(place, pe.OrganizationID)
}

// TrimKeep is the number of revisions of each file that trim_revisions
// keeps (trim_revisions_x, the current revision included); 0 when
// trim_revisions is off or trim_revisions_x is empty.
func (p Policy) TrimKeep() int {
	if !p.TrimRevisions {
		return 0
	}
	n, err := strconv.ParseUint(p.TrimRevisionsX, 10, 32)
	if err != nil {
		return 0 // "" (no count); validate refuses the rest
	}
	return int(n)
}

// PurgeDeletedAfter is how long after its deletion purge_deleted purges
// an item (purge_deleted_frequency); 0 when purge_deleted is off or the
// frequency is empty.
func (p Policy) PurgeDeletedAfter() time.Duration {
	if !p.PurgeDeleted {
		return 0
	}
	d, err := time.ParseDuration(p.PurgeDeletedFrequency)
	if err != nil || d <= 0 {
		return 0
	}
	return d
}

// ChangePasswordAfter is how long a password serves before its person
// must change it (change_password_frequency); 0 means never.
func (p Policy) ChangePasswordAfter() time.Duration {
	if p.ChangePasswordFrequency == nil {
		return 0
	}
	d, err := time.ParseDuration(*p.ChangePasswordFrequency)
	if err != nil || d <= 0 {
		return 0
	}
	return d
}

// PasswordExpired reports whether a password set at changed is older, at
// now, than change_password_frequency allows.
func (p Policy) PasswordExpired(changed, now time.Time) bool {
	d := p.ChangePasswordAfter()
	return d > 0 && now.Sub(changed) >= d
}

// PasswordExpiredFor reports whether person pe's password is older, at
// now, than change_password_frequency allows. A person imported from a
// directory server has no password of berth's to age: the directory
// judges theirs, and no new one set here would be used.
func (p Policy) PasswordExpiredFor(pe Person, now time.Time) bool {
	return pe.AuthSourceID == 0 && p.PasswordExpired(pe.PasswordChanged, now)
}

// ExtensionReadOnly refuses, with ErrExtensionLocked, a change by pe to
// the file named name holding size bytes, when locked_extensions makes
// it read-only for pe: a file with a locked extension may be created,
// and written while it is still empty (WebDAV clients create a file with
// an empty PUT or a LOCK, then send its contents), but once it has
// contents nobody the policy binds overwrites, renames, moves or deletes
// it. The administrators of place, the chain of the policy's
// organization, are not bound (Binds).
func (p Policy) ExtensionReadOnly(pe Person, place []uint64, name string, size int64) error {
	if size == 0 || !p.Binds(pe, place) || !p.ExtensionLocked(name) {
		return nil
	}
	return fmt.Errorf("%w: %q", ErrExtensionLocked, name)
}
