package rest

import (
	"net/http"

	"berth/account"
	"berth/httpserve"
	"berth/share"
	"berth/vfs"
)

// usageRoutes registers the organization's metrics (spec 4.6).
func (s *server) usageRoutes() {
	s.handle("GET /api/2/organization/{org}/metrics/usage", s.authed(s.orgUsage))
}

// rootSpaceUsage is spec 2.5's root_space_usage.
type rootSpaceUsage struct {
	DelFileCount          int64  `json:"del_file_count"`
	DelRevisionCount      int64  `json:"del_revision_count"`
	DeletedSize           int64  `json:"deleted_size"`
	DeletedSizeFormatted  string `json:"deleted_size_formatted"`
	FileCount             int64  `json:"file_count"`
	HeadSize              int64  `json:"head_size"`
	HeadSizeFormatted     string `json:"head_size_formatted"`
	PhysicalSize          int64  `json:"physical_size"`
	PhysicalSizeFormatted string `json:"physical_size_formatted"`
	RevisionCount         int64  `json:"revision_count"`
	RevisionSize          int64  `json:"revision_size"`
	RevisionSizeFormatted string `json:"revision_size_formatted"`
	RootCount             int64  `json:"root_count"`
	Type                  string `json:"type"`
}

func encodeSpaceUsage(u vfs.Usage) rootSpaceUsage {
	return rootSpaceUsage{
		DelFileCount:          u.DelFileCount,
		DelRevisionCount:      u.DelRevisionCount,
		DeletedSize:           u.DeletedSize,
		DeletedSizeFormatted:  httpserve.FormatSize(u.DeletedSize),
		FileCount:             u.FileCount,
		HeadSize:              u.HeadSize,
		HeadSizeFormatted:     httpserve.FormatSize(u.HeadSize),
		PhysicalSize:          u.PhysicalSize,
		PhysicalSizeFormatted: httpserve.FormatSize(u.PhysicalSize),
		RevisionCount:         u.RevisionCount,
		RevisionSize:          u.RevisionSize,
		RevisionSizeFormatted: httpserve.FormatSize(u.RevisionSize),
		RootCount:             u.RootCount,
		Type:                  "root_space_usage",
	}
}

// orgUsageCounts is spec 2.8's organization_usage_counts.
type orgUsageCounts struct {
	Accounts      int64  `json:"accounts"`
	AdminAccounts int64  `json:"admin_accounts"`
	Groups        int64  `json:"groups"`
	Guests        int64  `json:"guests"`
	Machines      int64  `json:"machines"`
	Organizations int64  `json:"organizations"`
	Type          string `json:"type"`
}

// orgUsage is spec 2.8's organization_usage.
type orgUsage struct {
	BackupSpaceUsage    rootSpaceUsage `json:"backup_space_usage"`
	TeamShareSpaceUsage rootSpaceUsage `json:"team_share_space_usage"`
	TotalSpaceUsage     rootSpaceUsage `json:"total_space_usage"`
	UserSpaceUsage      rootSpaceUsage `json:"user_space_usage"`
	Counts              orgUsageCounts `json:"counts"`
	Type                string         `json:"type"`
}

// orgUsage answers GET /api/2/organization/<id>/metrics/usage for those
// who manage the organization: the usage of the roots of the organization
// and of all its descendants (backup roots, share roots, sync roots as the
// users', and all of them), and the subtree counts. Each figure is a
// tally kept in the transactions that change it (account.TallyOrg), so the
// answer is a few reads whatever the organization holds.
func (s *server) orgUsage(r *http.Request) (any, error) {
	id, ok := parseID(r.PathValue("org"))
	if !ok {
		return nil, ErrNotFound
	}
	c := callerOf(r)
	if _, err := s.shares.Organization(r.Context(), c, id, share.OrgManage); err != nil {
		return nil, err
	}
	body := orgUsage{Type: "organization_usage"}
	for _, f := range []struct {
		typ string
		to  *rootSpaceUsage
	}{
		{"backup", &body.BackupSpaceUsage},
		{"share", &body.TeamShareSpaceUsage},
		{"sync", &body.UserSpaceUsage},
		{"", &body.TotalSpaceUsage},
	} {
		u, err := s.fs.TallyUsage(r.Context(), account.TallyOrg(id, f.typ))
		if err != nil {
			return nil, err
		}
		*f.to = encodeSpaceUsage(u)
	}
	_, sub, err := s.accounts.Counts(r.Context(), id)
	if err != nil {
		return nil, err
	}
	body.Counts = orgUsageCounts{
		Accounts: sub.Accounts, AdminAccounts: sub.AdminAccounts, Groups: sub.Groups,
		Guests: sub.Guests, Machines: sub.Machines, Organizations: sub.Organizations,
		Type: "organization_usage_counts",
	}
	return body, nil
}
