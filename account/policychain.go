package account

import (
	"context"
	"strings"

	"berth/kv"
)

// effectivePolicy is the policy a person of orgs[0] acts under: their
// organization's, tightened by every ancestor's (orgs as chain returns
// them). The administrators of an organization set its children's
// policies; were only the person's own organization's policy to count, a
// child's administrators could make a grandchild with looser limits and
// put users there, as nesting once lifted num_orgs_maximum. So every
// limit and switch that restricts persons takes the strictest value along
// the chain: the smallest maximum file size, the union of excluded and
// locked extensions, a switch that withholds something withheld if any
// organization withholds it (file_server_enabled too: a child's
// administrators turned it on in a grandchild of theirs, and its persons
// served their machines' folders where an ancestor allows none), the
// shortest password and session lifetimes, two-step and secure shares
// required if any requires them. Space quotas bound the chain through
// the ledger (ChainQuotas), and what an organization's own
// administrators may do (admin_*), its counts, its billing and its
// background jobs stay the organization's own, with one exception:
// admin_browse_files, admin_browse_remote and admin_create_users
// withheld by an ancestor that is not top-level are withheld below it
// too. Its administrators, whom their parent withheld them from, make or
// promote administrators in the organizations below theirs, set their
// passwords and sign in as them: with the organization's own switches
// alone, a grandchild's administrator of their making browsed, or
// created users, where they may not. A top-level organization's switches bind only its
// own administrators (share's browses and orgAllows): they set them
// themselves, so they withhold nothing from anyone below.
func effectivePolicy(orgs []Organization) Policy {
	p := orgs[0].Policy
	for _, o := range orgs[1:] {
		a := o.Policy
		if o.ParentID != 0 {
			p.AdminBrowseFiles = p.AdminBrowseFiles && a.AdminBrowseFiles
			p.AdminBrowseRemote = p.AdminBrowseRemote && a.AdminBrowseRemote
			p.AdminCreateUsers = p.AdminCreateUsers && a.AdminCreateUsers
		}
		if a.MaxFileSize > 0 && (p.MaxFileSize == 0 || a.MaxFileSize < p.MaxFileSize) {
			p.MaxFileSize = a.MaxFileSize
		}
		p.ExcludedExtensions = unionExtensions(p.ExcludedExtensions, a.ExcludedExtensions)
		p.LockedExtensions = unionExtensions(p.LockedExtensions, a.LockedExtensions)
		for _, f := range []struct{ dst, src *bool }{
			{&p.WebDAVEnabled, &a.WebDAVEnabled},
			{&p.UserLockFiles, &a.UserLockFiles},
			{&p.UserCreateShares, &a.UserCreateShares},
			{&p.UserPurgeDeleted, &a.UserPurgeDeleted},
			{&p.UserTrimRevisions, &a.UserTrimRevisions},
			{&p.UserCreateBackups, &a.UserCreateBackups},
			{&p.BackupsEnabled, &a.BackupsEnabled},
			{&p.FileServerEnabled, &a.FileServerEnabled},
		} {
			*f.dst = *f.dst && *f.src
		}
		p.RequireTwoStepAuth = p.RequireTwoStepAuth || a.RequireTwoStepAuth
		p.SecureShares = p.SecureShares || a.SecureShares
		p.RequireMobileLock = p.RequireMobileLock || a.RequireMobileLock
		if d := a.DeactivateTokenAfter(); d > 0 && (p.DeactivateTokenAfter() == 0 || d < p.DeactivateTokenAfter()) {
			p.DeactivateTokenFrequency = a.DeactivateTokenFrequency
		}
		if d := a.ChangePasswordAfter(); d > 0 && (p.ChangePasswordAfter() == 0 || d < p.ChangePasswordAfter()) {
			p.ChangePasswordFrequency = a.ChangePasswordFrequency
		}
	}
	return p
}

// unionExtensions joins two comma-separated extension lists, each
// extension once (compared as ExtensionExcluded compares them).
func unionExtensions(a, b string) string {
	if b == "" {
		return a
	}
	seen := map[string]bool{}
	var out []string
	for _, list := range []string{a, b} {
		for e := range strings.SplitSeq(list, ",") {
			e = strings.TrimSpace(e)
			if e != "" && !seen[strings.ToLower(e)] {
				seen[strings.ToLower(e)] = true
				out = append(out, e)
			}
		}
	}
	return strings.Join(out, ",")
}

// EffectivePolicy returns the policy organization id's persons act under:
// its own tightened by every ancestor's (effectivePolicy). What a
// machine's owner may do is judged by it, whoever asks. Errors:
// ErrNotFound.
func (s *Service) EffectivePolicy(ctx context.Context, id uint64) (Policy, error) {
	var p Policy
	err := s.db.View(ctx, func(tx kv.Txn) error {
		orgs, err := s.chain(tx, id, notFoundf("organization %d", id))
		if err != nil {
			return err
		}
		p = effectivePolicy(orgs)
		return nil
	})
	return p, err
}
