package rest

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"berth/account"
	"berth/vfs"
)

// personRoutes registers the person routes of spec 4.8 built so far.
func (s *server) personRoutes() {
	s.handle("GET /api/2/person", s.authed(s.getSelf))
	s.handle("GET /api/2/person/{ref}", s.authed(s.getPerson))
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

// getSelf answers GET /api/2/person: the caller.
func (s *server) getSelf(r *http.Request) (any, error) {
	c := callerOf(r)
	return s.encodePerson(r.Context(), c.Person, c.Organization)
}

// getPerson answers GET /api/2/person/{id or e-mail}. A person reads
// themself; an administrator also reads the persons of their own
// organization. Anyone else is 404, like an id that does not exist, so
// the route does not reveal which ids and addresses are taken.
func (s *server) getPerson(r *http.Request) (any, error) {
	me := callerOf(r).Person
	ref := r.PathValue("ref")
	var (
		p   account.Person
		err error
	)
	if strings.Contains(ref, "@") {
		p, err = s.accounts.PersonByLogin(r.Context(), ref)
		// Logins share one namespace: make sure ref named an e-mail address.
		if err == nil && !strings.EqualFold(p.Email, ref) {
			err = account.ErrNotFound
		}
	} else {
		id, perr := strconv.ParseUint(ref, 10, 64)
		if perr != nil {
			return nil, ErrNotFound
		}
		if id == me.ID {
			p = me
		} else {
			p, err = s.accounts.Person(r.Context(), id)
		}
	}
	if errors.Is(err, account.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	if p.ID != me.ID && !(me.Admin && me.OrganizationID == p.OrganizationID) {
		return nil, ErrNotFound
	}
	return s.encodePerson(r.Context(), p, callerOf(r).Organization)
}

// encodePerson builds the person object: roots and usage from vfs, the
// policy from org, the person's organization. A caller sees only people of
// their own organization, so that is the one authentication read.
func (s *server) encodePerson(ctx context.Context, p account.Person, org account.Organization) (personBody, error) {
	pol := org.Policy
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
		root, _, err := s.personRoot(ctx, id)
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
	// Every live root of the person, of every type, from the ledger.
	u, err := s.fs.TallyUsage(ctx, account.TallyPerson(p.ID))
	if err != nil {
		return personBody{}, err
	}
	body.SpaceUsage = u.PhysicalSize
	body.SpaceUsageFormatted = formatSize(body.SpaceUsage)
	return body, nil
}

// personRoot returns the root object of a root the person owns and its
// physical usage.
func (s *server) personRoot(ctx context.Context, id uint64) (rootJSON, int64, error) {
	root, err := s.fs.Root(ctx, id)
	if err != nil {
		return rootJSON{}, 0, err
	}
	u, err := s.fs.Usage(ctx, id)
	if err != nil {
		return rootJSON{}, 0, err
	}
	return encodeRoot(root, u, ownerPermissions()), u.PhysicalSize, nil
}

// formatQuota is formatSize with 0 written as "unlimited", which is what a
// zero quota means.
func formatQuota(n int64) string {
	if n == 0 {
		return "unlimited"
	}
	return formatSize(n)
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
