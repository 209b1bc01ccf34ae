package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"berth/account"
	"berth/vfs"
)

// policyJobs apply, in the background, the parts of each organization's
// policy that act on stored files rather than on requests: trim_revisions
// (keep trim_revisions_x revisions of each file) and purge_deleted (purge
// what was deleted longer ago than purge_deleted_frequency). Each
// organization's policy applies to the roots it owns itself (its
// persons' and its own); its children have their own policies. The
// deleted roots of a deleted organization's subtree, which count against
// its live ancestors' quotas until purged, go also by the purge_deleted of
// the nearest live organization above it (the sooner of the two).
type policyJobs struct {
	jobs     *clusterJobs // runs each round once per cluster; nil: here
	files    *vfs.FS
	accounts *account.Service
	log      *slog.Logger
	now      func() time.Time
	// batch bounds one run: at most this many revisions trimmed and this
	// many deleted items purged. What is left waits for the next run,
	// which walks from the start again: what earlier runs trimmed costs
	// it a count of keys, no more.
	batch int

	runs    *prometheus.CounterVec // by result: ok, error
	trimmed prometheus.Counter
	purged  prometheus.Counter
}

// Page sizes of the walk: organizations read per transaction, roots of
// one organization per transaction, and roots whose trash is purged by
// one scan of the store's deleted items.
const (
	policyOrgPage   = 100
	policyRootPage  = 1000
	policyPurgeScan = 10000
)

// newPolicyJobs builds the jobs; reg may be nil.
func newPolicyJobs(files *vfs.FS, accounts *account.Service, log *slog.Logger, reg prometheus.Registerer, batch int) *policyJobs {
	j := &policyJobs{
		files: files, accounts: accounts, log: log, now: time.Now, batch: batch,
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_policy_runs_total",
			Help: "Runs of the trim_revisions and purge_deleted policy jobs, by result.",
		}, []string{"result"}),
		trimmed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_policy_trimmed_revisions_total",
			Help: "Revisions dropped by the organizations' trim_revisions policies.",
		}),
		purged: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_policy_purged_items_total",
			Help: "Deleted items, and deleted roots whole, purged by the organizations' purge_deleted policies.",
		}),
	}
	if reg != nil {
		reg.MustRegister(j.runs, j.trimmed, j.purged)
	}
	return j
}

// loop runs the jobs once at once, then every interval until ctx ends;
// interval 0 turns them off.
func (j *policyJobs) loop(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		return
	}
	run := func() { j.jobs.once(ctx, "policy", j.runLogged) }
	run()
	every(ctx, interval, run)
}

func (j *policyJobs) runLogged(ctx context.Context) {
	rep, err := j.run(ctx)
	switch {
	case err != nil && ctx.Err() != nil:
		// Shutting down: the next start runs again.
	case err != nil:
		j.runs.WithLabelValues("error").Inc()
		j.log.Error("policy jobs", "error", err, "report", rep.String())
	default:
		j.runs.WithLabelValues("ok").Inc()
		if rep.Trim.Revisions > 0 || rep.Purge.Purged > 0 || rep.Purge.Roots > 0 {
			j.log.Info("policy jobs", "report", rep.String())
		}
	}
}

// orgLink is what heir needs of an organization: a run reads every
// organization, and keeps this much of each rather than the whole record.
type orgLink struct {
	id, parent uint64
	deleted    bool
	purgeAfter time.Duration // its Policy.PurgeDeletedAfter
}

func linkOf(o account.Organization) orgLink {
	return orgLink{id: o.ID, parent: o.ParentID, deleted: o.Deleted, purgeAfter: o.Policy.PurgeDeletedAfter()}
}

// heir reports whether organization o is gone, deleted or below a
// deleted organization, and then the nearest live organization above
// it, whose purge_deleted empties its deleted roots (the zero orgLink
// where none is: a top-level organization cannot be deleted, so only a
// damaged store has none). seen holds the organizations read so far; one
// above o not among them is read.
func (j *policyJobs) heir(ctx context.Context, o account.Organization, seen map[uint64]orgLink) (orgLink, bool, error) {
	var heir orgLink
	gone := false
	for l, depth := linkOf(o), 0; ; depth++ {
		if depth > account.MaxOrgDepth {
			return orgLink{}, false, fmt.Errorf("organization %d nests deeper than %d", o.ID, account.MaxOrgDepth)
		}
		if l.deleted {
			gone, heir = true, orgLink{}
		} else if gone && heir.id == 0 {
			heir = l
		}
		if l.parent == 0 {
			return heir, gone, nil
		}
		p, ok := seen[l.parent]
		if !ok {
			po, err := j.accounts.Organization(ctx, l.parent)
			if err != nil {
				return orgLink{}, false, err
			}
			p = linkOf(po)
			seen[p.id] = p
		}
		l = p
	}
}

// policyReport says what one run did.
type policyReport struct {
	Organizations int // organizations whose policy asked for work
	Roots         int // their roots visited
	Trim          vfs.TrimReport
	Purge         vfs.PurgeReport
}

func (r policyReport) String() string {
	return fmt.Sprintf("%d organizations, %d roots: %s; %s", r.Organizations, r.Roots, r.Trim, r.Purge)
}

// run walks every organization once and applies its policy to its roots.
// A root that fails is logged and the walk goes on, so one damaged root
// does not stop every other organization's policy; a cancelled ctx stops
// it.
func (j *policyJobs) run(ctx context.Context) (policyReport, error) {
	var rep policyReport
	var errs []error
	cutoffs := map[uint64]time.Time{}
	flush := func() {
		if len(cutoffs) == 0 {
			return
		}
		// A deleted root purged whole counts as one item, as a
		// folder with its tree does (vfs.FS.PurgeDeletedIn).
		left := j.batch - rep.Purge.Purged - rep.Purge.Roots
		if left <= 0 {
			clear(cutoffs)
			return
		}
		pr, err := j.files.PurgeDeletedIn(ctx, cutoffs, left)
		clear(cutoffs)
		rep.Purge.Purged += pr.Purged
		rep.Purge.Roots += pr.Roots
		rep.Purge.Skipped += pr.Skipped
		rep.Purge.Failed += pr.Failed
		j.purged.Add(float64(pr.Purged + pr.Roots))
		if err != nil {
			errs = append(errs, err)
		}
	}
	var after uint64
	seen := map[uint64]orgLink{} // by id, for the chains above
	for ctx.Err() == nil {
		orgs, err := j.accounts.OrganizationsAfter(ctx, after, policyOrgPage)
		if err != nil {
			return rep, errors.Join(append(errs, err)...)
		}
		if len(orgs) == 0 {
			break
		}
		after = orgs[len(orgs)-1].ID
		for _, o := range orgs {
			seen[o.ID] = linkOf(o)
		}
		for _, o := range orgs {
			keep, purgeAfter := o.Policy.TrimKeep(), o.Policy.PurgeDeletedAfter()
			heir, gone, err := j.heir(ctx, o, seen)
			if err != nil {
				// A damaged chain: the organization's own policy
				// still applies to its live roots, as before.
				errs = append(errs, fmt.Errorf("organization %d: %w", o.ID, err))
				if o.Deleted {
					continue
				}
			}
			if gone {
				// Its roots were deleted with it (or with the deleted
				// organization above it), and count against every
				// live ancestor's quota until purged; nobody sets its
				// policy any more. The nearest live ancestor's
				// purge_deleted empties them, or its own as it was
				// left, whichever is sooner; nothing is left to trim.
				keep = 0
				if h := heir.purgeAfter; h > 0 && (purgeAfter == 0 || h < purgeAfter) {
					purgeAfter = h
				}
			}
			if keep == 0 && purgeAfter == 0 {
				continue
			}
			rep.Organizations++
			cutoff := j.now().Add(-purgeAfter)
			for offset := 0; ctx.Err() == nil; offset += policyRootPage {
				roots, _, err := j.accounts.OrganizationRoots(ctx, o.ID, offset, policyRootPage)
				if err != nil {
					errs = append(errs, fmt.Errorf("roots of organization %d: %w", o.ID, err))
					break
				}
				for _, r := range roots {
					rep.Roots++
					if left := j.batch - rep.Trim.Revisions; keep > 0 && left > 0 {
						tr, err := j.files.TrimRevisions(ctx, r.RootID, keep, left)
						rep.Trim.Files += tr.Files
						rep.Trim.Revisions += tr.Revisions
						rep.Trim.Bytes += tr.Bytes
						rep.Trim.More = rep.Trim.More || tr.More
						j.trimmed.Add(float64(tr.Revisions))
						if err != nil && !errors.Is(err, vfs.ErrRootDeleted) && !errors.Is(err, vfs.ErrNotExist) {
							errs = append(errs, fmt.Errorf("organization %d: %w", o.ID, err))
						}
					} else if keep > 0 {
						rep.Trim.More = true
					}
					if purgeAfter > 0 {
						cutoffs[r.RootID] = cutoff
						if len(cutoffs) >= policyPurgeScan {
							flush()
						}
					}
				}
				if len(roots) < policyRootPage {
					break
				}
			}
		}
		if len(orgs) < policyOrgPage {
			break
		}
	}
	flush()
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return rep, errors.Join(errs...)
}
