package daemon

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	sd "github.com/coreos/go-systemd/v22/daemon"

	"berth/account"
	"berth/config"
	"berth/kv"
	"berth/share"
	"berth/vfs/chunk"
)

// watchdog pings systemd at half of WATCHDOG_USEC while the metadata store
// answers and takes writes, so a wedged daemon, or one whose store lost an
// fsync, is restarted. Without a watchdog it returns.
func watchdog(ctx context.Context, db kv.Store, log *slog.Logger) {
	interval, err := sd.SdWatchdogEnabled(false)
	if err != nil {
		log.Warn("reading the systemd watchdog setting", "error", err)
		return
	}
	if interval <= 0 {
		return
	}
	every(ctx, interval/2, func() {
		// A cheap read proves the store is not stuck.
		probe, cancel := context.WithTimeout(ctx, interval/2)
		err := db.View(probe, func(kv.Txn) error { return nil })
		cancel()
		if err != nil {
			log.Warn("watchdog: metadata store not answering; not pinging", "error", err)
			return
		}
		// A store that lost an fsync refuses every write until reopened;
		// the restart that the missed pings bring replays its log.
		if err := failed(db); err != nil {
			log.Error("watchdog: metadata store refuses writes; not pinging, so systemd restarts berth", "error", err)
			return
		}
		if _, err := sd.SdNotify(false, sd.SdNotifyWatchdog); err != nil {
			log.Warn("sd_notify WATCHDOG failed", "error", err)
		}
	})
}

// failed is the error that stopped db's writes, if its engine can fail
// that way (kv.Failer), else nil.
func failed(db kv.Store) error {
	if f, ok := db.(kv.Failer); ok {
		return f.Failed()
	}
	return nil
}

// runGC gives back db's space, if its engine needs to be asked (kv.GCer).
func runGC(ctx context.Context, db kv.Store) error {
	if g, ok := db.(kv.GCer); ok {
		return g.RunGC(ctx)
	}
	return nil
}

// every calls fn every period, the first time one period from now, until
// ctx ends.
func every(ctx context.Context, period time.Duration, fn func()) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// startExtendEvery is how often a start that is still opening the stores
// asks systemd for more time; each asks for three times that.
const startExtendEvery = 10 * time.Second

// extendStartTimeout asks systemd, every period until ctx ends (at READY),
// to extend the start timeout (EXTEND_TIMEOUT_USEC). Opening the stores
// after a crash sweeps the whole chunk store, which on a large store takes
// longer than a unit's default 90 s TimeoutStartSec; without this systemd
// would kill the recovery and restart it, forever. Outside systemd the
// messages go nowhere.
func extendStartTimeout(ctx context.Context, period time.Duration, log *slog.Logger) {
	msg := fmt.Sprintf("EXTEND_TIMEOUT_USEC=%d\nSTATUS=starting: opening the data directory", (3 * period).Microseconds())
	every(ctx, period, func() {
		if _, err := sd.SdNotify(false, msg); err != nil {
			log.Warn("sd_notify EXTEND_TIMEOUT_USEC failed", "error", err)
		}
	})
}

// collectGarbage runs collectOnce every interval (0: never).
func collectGarbage(ctx context.Context, interval, purgeAfter time.Duration, st *stores, log *slog.Logger) {
	if interval <= 0 {
		return
	}
	every(ctx, interval, func() {
		st.jobs.once(ctx, "gc", func(ctx context.Context) { collectOnce(ctx, purgeAfter, st, log) })
	})
}

// collectOnce purges what was deleted longer than purgeAfter ago (0:
// nothing), then runs the value-log GC of the metadata store and the
// chunk GC of the file system; it logs what fails.
func collectOnce(ctx context.Context, purgeAfter time.Duration, st *stores, log *slog.Logger) {
	if purgeAfter > 0 {
		rep, err := st.files.PurgeDeleted(ctx, time.Now().Add(-purgeAfter))
		switch {
		case err != nil && ctx.Err() == nil:
			log.Error("purging deleted items", "error", err, "report", rep.String())
		case rep.Purged > 0 || rep.Roots > 0:
			log.Info("purged deleted items", "report", rep.String(), "older_than", purgeAfter)
		}
	}
	if err := runGC(ctx, st.db); err != nil && ctx.Err() == nil {
		log.Error("metadata store gc", "error", err)
	}
	rep, err := st.files.GC(ctx)
	if err != nil {
		if ctx.Err() == nil {
			log.Error("chunk gc", "error", err)
		}
		return
	}
	log.Info("chunk gc", "report", rep.String())
}

// fsckCommand checks a stopped data directory and prints the report; it
// fails when anything is wrong.
func fsckCommand(ctx context.Context, cfg config.Config, log *slog.Logger, out io.Writer, verify bool) error {
	st, err := openStores(ctx, cfg, log, nil)
	if err != nil {
		return err
	}
	defer st.close(log)
	rep, err := st.files.Fsck(ctx, verify)
	if err != nil {
		return fmt.Errorf("fsck: %w", err)
	}
	fmt.Fprintln(out, rep.String())
	// Each chunk by name too: a count alone leaves the operator nothing
	// to restore from a backup (chunks/ab/<id>) or to look for.
	for _, p := range []struct {
		what string
		ids  []chunk.ID
	}{{"missing", rep.Missing}, {"corrupt", rep.Corrupt}, {"bad refcount", rep.BadRefcounts}, {"leaked", rep.Leaked}} {
		for _, id := range p.ids {
			fmt.Fprintln(out, p.what, id)
		}
	}
	// The counts of what uploads in progress reserve, each by owner and
	// root, as the chunks are by name.
	for _, b := range rep.BadReservations {
		fmt.Fprintln(out, "bad reservation count", b)
	}
	for _, b := range rep.BadUploadCounts {
		fmt.Fprintln(out, "bad upload count", b)
	}
	// A folder whose listing hash and count are read from a wrong sum.
	for _, f := range rep.BadListSums {
		fmt.Fprintln(out, "bad listing sum of folder", f)
	}
	// Usage that quotas are checked against.
	for _, r := range rep.BadUsage {
		fmt.Fprintln(out, "bad usage ledger of root", r)
	}
	for _, t := range rep.BadTallies {
		fmt.Fprintln(out, "bad tally", t)
	}
	if !rep.OK() {
		return errFsckProblems
	}
	return nil
}

// gcCommand collects garbage in a stopped data directory and prints the
// report.
func gcCommand(ctx context.Context, cfg config.Config, log *slog.Logger, out io.Writer) error {
	st, err := openStores(ctx, cfg, log, nil)
	if err != nil {
		return err
	}
	defer st.close(log)
	return collect(ctx, st, out)
}

// collect removes unreferenced chunks, then runs the metadata store's
// value-log GC (which can then reclaim the keys the first removed), and
// prints the chunk report.
func collect(ctx context.Context, st *stores, out io.Writer) error {
	rep, err := st.files.GC(ctx)
	if err != nil {
		return fmt.Errorf("gc: %w", err)
	}
	if err := runGC(ctx, st.db); err != nil {
		return fmt.Errorf("gc: metadata store: %w", err)
	}
	fmt.Fprintln(out, rep.String())
	return nil
}

// purgeCommand purges the items deleted more than olderThan ago from a
// stopped data directory, collects the garbage that leaves, and prints both
// reports.
func purgeCommand(ctx context.Context, cfg config.Config, log *slog.Logger, out io.Writer, olderThan time.Duration) error {
	st, err := openStores(ctx, cfg, log, nil)
	if err != nil {
		return err
	}
	defer st.close(log)
	rep, purgeErr := st.files.PurgeDeleted(ctx, time.Now().Add(-olderThan))
	fmt.Fprintln(out, rep.String())
	if purgeErr != nil && ctx.Err() != nil {
		return fmt.Errorf("purge-deleted: %w", purgeErr)
	}
	// What was purged frees its chunks even when some item failed.
	if err := collect(ctx, st, out); err != nil {
		return fmt.Errorf("purge-deleted: %w", errors.Join(purgeErr, err))
	}
	if purgeErr != nil {
		return fmt.Errorf("purge-deleted: %w", purgeErr)
	}
	return nil
}

// resetPasswordEnv names the environment variable that gives
// reset-password the new password instead of a random one, as
// BERTH_ADMIN_PASSWORD does for the first start. It is not a configuration
// key: it belongs to one command, once.
const resetPasswordEnv = "BERTH_RESET_PASSWORD"

// resetPasswordCommand gives the person behind login, in a stopped data
// directory, a new password (password, or a random one when empty),
// clears the login's lockout and ends the person's sessions
// (account.ResetPassword). A random password is printed once, on out.
func resetPasswordCommand(ctx context.Context, cfg config.Config, log *slog.Logger, out io.Writer, login, password string) error {
	generated := password == ""
	if generated {
		// 26 base32 characters, 128 bits, as the first start's.
		password = rand.Text()
	}
	st, err := openStores(ctx, cfg, log, nil)
	if err != nil {
		return fmt.Errorf("reset-password: %w", err)
	}
	defer st.close(log)
	p, err := st.newAccounts(accountOptions(cfg)).ResetPassword(ctx, login, password)
	switch {
	case errors.Is(err, account.ErrNotFound):
		return fmt.Errorf("reset-password: no person in %s has the username or e-mail address %q", cfg.Data, login)
	case errors.Is(err, account.ErrInvalid) && !generated:
		return fmt.Errorf("reset-password: the password in %s: %w", resetPasswordEnv, err)
	case err != nil:
		return fmt.Errorf("reset-password: %w", err)
	}
	log.Info("reset-password: password reset, lockout cleared, sessions ended", "login", p.Username, "person_id", p.ID)
	if generated {
		_, err := fmt.Fprintf(out, "\nberth: new password for %s: %s\nberth: (this is the only time it is printed; the lockout is cleared and every session ended)\n\n", p.Username, password)
		if err != nil {
			// The password is set and nobody saw it: the account is
			// as lost as before, which the exit status must say.
			return fmt.Errorf("reset-password: the new password of %s is set but could not be printed (run reset-password again): %w", p.Username, err)
		}
	} else {
		fmt.Fprintf(out, "\nberth: password for %s set from %s; the lockout is cleared and every session ended\n\n", p.Username, resetPasswordEnv)
	}
	return nil
}

// expireUploadsEvery is how often the staged (tus) uploads past their
// expiry are ended; their reservation and chunks go back then, the
// chunks themselves at the next chunk GC.
const expireUploadsEvery = 10 * time.Minute

// expireUploads ends the expired staged uploads every period until ctx
// ends; it logs what it ended and what fails.
func expireUploads(ctx context.Context, period time.Duration, st *stores, log *slog.Logger) {
	every(ctx, period, func() {
		st.jobs.once(ctx, "expire-uploads", func(ctx context.Context) {
			n, err := st.files.ExpireStaged(ctx)
			if err != nil && ctx.Err() == nil {
				log.Error("expiring staged uploads", "error", err, "ended", n)
			} else if n > 0 {
				log.Info("expired staged uploads", "ended", n)
			}
		})
	})
}

// pruneActivityEvery is how often the activity log drops the records
// older than activity.retention that the store's TTL keeps (Prune).
const pruneActivityEvery = time.Hour

// pruneActivity removes, at start and then every period, the activity
// records written under a longer retention than the one configured now,
// or under none (activity.Log.Prune): the TTL of each record is set when
// it is written, so lowering activity.retention left the older records
// their old time, forever for those written while it was 0. Short
// transactions, so writers of new records are not held up.
func pruneActivity(ctx context.Context, period time.Duration, st *stores, log *slog.Logger) {
	prune := func() {
		st.jobs.once(ctx, "prune-activity", func(ctx context.Context) {
			n, err := st.activity.Prune(ctx)
			if err != nil && ctx.Err() == nil {
				log.Error("pruning the activity log", "error", err, "removed", n)
			} else if n > 0 {
				log.Info("pruned the activity log past activity.retention", "removed", n)
			}
		})
	}
	prune()
	every(ctx, period, prune)
}

// finishGroupDeletions completes, once at start, the group deletions that
// a crash or a failed request left half done between their batches
// (account.FinishGroupDeletions), so that such a group does not stay,
// with part of its members, until someone deletes it again. In a cluster
// the node holding the job's lease does it; another node's start finds
// none left.
func finishGroupDeletions(ctx context.Context, st *stores, accounts *account.Service, log *slog.Logger) {
	mendAtStart(ctx, st, log, "finish-group-deletions", func(ctx context.Context) (int, error) {
		return accounts.FinishGroupDeletions(account.WithActor(ctx, account.System))
	}, "finishing group deletions", "finished group deletions left half done", "groups")
}

// dateInvitations gives, once at start, the organization share
// invitations stored before invitations expired their lifetime from now
// (share.Service.DateInvitations), so that an upgrade neither ends the
// invitations already sent nor keeps those never accepted forever. In a
// cluster the node holding the job's lease does it; another node's start
// finds none left.
func dateInvitations(ctx context.Context, st *stores, shares *share.Service, log *slog.Logger) {
	mendAtStart(ctx, st, log, "date-invitations", shares.DateInvitations,
		"dating invitations stored before they expired", "dated invitations stored before they expired", "invitations")
}

// indexLinkSubjects mends, once at start, the index of the links each
// guest and person subscribes to that a release before left short or
// over (share.Service.IndexLinkSubjects): without it a guest kept opening
// a link that their shares listing left out.
func indexLinkSubjects(ctx context.Context, st *stores, shares *share.Service, log *slog.Logger) {
	mendAtStart(ctx, st, log, "index-link-subjects", shares.IndexLinkSubjects,
		"mending the share links' index of subscribers", "mended the share links' index of subscribers stored before it was kept with them", "entries")
}

// mendAtStart runs mend once at start as the job named job (in a
// cluster, on the node holding its lease) and logs what it did: failing
// (an error line, with how many it mended before), or how many it
// mended, under unit, when it mended any.
func mendAtStart(ctx context.Context, st *stores, log *slog.Logger, job string, mend func(context.Context) (int, error), failing, mended, unit string) {
	st.jobs.once(ctx, job, func(ctx context.Context) {
		n, err := mend(ctx)
		if err != nil && ctx.Err() == nil {
			log.Error(failing, "error", err, "mended", n)
		} else if n > 0 {
			log.Info(mended, unit, n)
		}
	})
}
