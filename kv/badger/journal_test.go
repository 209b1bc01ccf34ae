package badger

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dgraph "github.com/dgraph-io/badger/v4"

	"berth/kv"
)

// TestJournalReplay: what Badger's own logs lose in a crash, the journal
// gives back. Each row opens a store, closes it and copies its directory
// (the snapshot: Badger's files as a power cut could leave them, with
// nothing written after), opens it again and commits, then copies the
// journal alone into the snapshot, as the crash leaves it after every
// acknowledged round, and opens the snapshot: it must read as the store
// did, but for a record the crash cut, and refuse to open over damage it
// cannot read past. Checkpoints wait meanwhile, as if slow: one would
// make Badger's files, which the snapshot does not have, hold what the
// earlier slots did.
func TestJournalReplay(t *testing.T) {
	ctx := context.Background()
	big := strings.Repeat("v", 64<<10) // in Badger's value log
	tests := []struct {
		name string
		slot int64
		// commits runs all but the last commit; last runs the last.
		commits func(t *testing.T, s *DB)
		// damage changes the copied journal in dir; cut says it cut
		// the last commit's record.
		damage func(t *testing.T, s *DB, dir string)
		cut    bool
		// reopen is the memtable size the copy is opened with; zero
		// for the default.
		reopen  int64
		wantErr error
	}{
		{name: "sets, overwrites, deletes, expiry, large values", commits: func(t *testing.T, s *DB) {
			for i := range 20 {
				put(t, s, fmt.Sprint("k", i), fmt.Sprint("value ", i))
			}
			put(t, s, "base", "overwritten")
			update(t, s, func(tx kv.Txn) error { return tx.Delete([]byte("gone")) })
			update(t, s, func(tx kv.Txn) error { return tx.SetTTL([]byte("ttl"), []byte("later"), time.Hour) })
			put(t, s, "big", big)
		}},
		{name: "8 writers at once", commits: func(t *testing.T, s *DB) {
			var wg sync.WaitGroup
			for w := range 8 {
				wg.Go(func() {
					for i := range 25 {
						put(t, s, fmt.Sprint("w", w, "-", i), fmt.Sprint(i))
						put(t, s, fmt.Sprint("shared", i%3), fmt.Sprint(w))
					}
				})
			}
			wg.Wait()
		}},
		{name: "across three slots", slot: 16 << 10, commits: func(t *testing.T, s *DB) {
			for i := range 26 {
				put(t, s, fmt.Sprint("k", i%30), strings.Repeat(fmt.Sprint(i%10), 1000))
			}
			if s.jl.epoch-s.jl.cpFrom < 2 {
				t.Fatalf("epochs %d to %d: the row wants three", s.jl.cpFrom, s.jl.epoch)
			}
		}},
		{name: "the checkpoint file lost", slot: 16 << 10, commits: func(t *testing.T, s *DB) {
			for i := range 20 {
				put(t, s, fmt.Sprint("k", i), strings.Repeat("x", 1000))
			}
		}, damage: func(t *testing.T, s *DB, dir string) {
			if err := os.Remove(filepath.Join(dir, journalDir, "checkpoint")); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "the last record cut short", commits: func(t *testing.T, s *DB) {
			put(t, s, "k", "v")
		}, cut: true, damage: func(t *testing.T, s *DB, dir string) {
			if err := os.Truncate(slotPath(s, dir), s.jl.off-3); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "the last record damaged", commits: func(t *testing.T, s *DB) {
			put(t, s, "k", "v")
		}, cut: true, damage: func(t *testing.T, s *DB, dir string) {
			flip(t, slotPath(s, dir), s.jl.off-2)
		}},
		{name: "a record damaged before a later epoch", slot: 16 << 10, commits: func(t *testing.T, s *DB) {
			for i := range 20 {
				put(t, s, fmt.Sprint("k", i), strings.Repeat("x", 1000))
			}
		}, damage: func(t *testing.T, s *DB, dir string) {
			flip(t, firstSlotPath(t, s, dir), slotHeader+recordHeader+1)
		}, wantErr: errJournal},
		{name: "a slot's header damaged before a later epoch", slot: 16 << 10, commits: func(t *testing.T, s *DB) {
			for i := range 20 {
				put(t, s, fmt.Sprint("k", i), strings.Repeat("x", 1000))
			}
		}, damage: func(t *testing.T, s *DB, dir string) {
			flip(t, firstSlotPath(t, s, dir), 9)
		}, wantErr: errJournal},
		// Opened with memtables too small for what one op once took,
		// the replay looped for ever committing empty transactions.
		{name: "an op too big for the memtables it is replayed into", commits: func(t *testing.T, s *DB) {
			put(t, s, strings.Repeat("k", 30000), "v")
		}, reopen: 64 << 10, wantErr: errJournal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir, snap := t.TempDir(), t.TempDir()
			opts := Options{journalSlot: tc.slot}
			s := openDisk(t, dir, opts)
			put(t, s, "base", "before")
			put(t, s, "gone", "before")
			if _, err := s.NextID(ctx, "node"); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			copyTree(t, dir, snap)

			s = openDisk(t, dir, opts)
			hold := make(chan struct{})
			s.jl.beforeCheckpoint = func() { <-hold }
			var ids []uint64
			for range 3 {
				id, err := s.NextID(ctx, "node")
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id)
			}
			update(t, s, func(tx kv.Txn) error { return tx.Set([]byte("ids"), fmt.Append(nil, ids)) })
			tc.commits(t, s)
			before := dump(t, s)
			put(t, s, "last", "commit")
			after := dump(t, s)
			// The crash: the journal as the last round left it.
			if err := os.RemoveAll(filepath.Join(snap, journalDir)); err != nil {
				t.Fatal(err)
			}
			copyTree(t, filepath.Join(dir, journalDir), filepath.Join(snap, journalDir))
			if tc.damage != nil {
				tc.damage(t, s, snap)
			}
			close(hold)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}

			r, err := Open(Options{Dir: snap, Logger: testLogger(t), journalSlot: tc.slot, MemTableSize: tc.reopen})
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Open over the damaged journal: %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			want := after
			if tc.cut {
				want = before
			}
			if got := dump(t, r); !maps.Equal(got, want) {
				t.Errorf("after the replay:\n%v\nwant\n%v", summary(got), summary(want))
			}
			// Ids handed out before the crash and used in a
			// durable commit are not handed out again.
			id, err := r.NextID(ctx, "node")
			if err != nil {
				t.Fatal(err)
			}
			if id <= ids[len(ids)-1] {
				t.Errorf("NextID after the replay = %d, already used: %v", id, ids)
			}
		})
	}
}

// TestJournalOneSync: a round fdatasyncs the journal alone, whatever the
// commit wrote (a value Badger keeps in its value log too); Badger's logs
// are synced only by checkpoints.
func TestJournalOneSync(t *testing.T) {
	s := openDisk(t, t.TempDir(), Options{})
	defer s.Close()
	for _, size := range []int{0, 10, valueThreshold, 4 << 10, 64 << 10} {
		before := s.SyncStats()
		put(t, s, fmt.Sprint("k", size), strings.Repeat("v", size))
		after := s.SyncStats()
		if r, f, c := after.Rounds-before.Rounds, after.Files-before.Files, after.Checkpoints-before.Checkpoints; r != 1 || f != 1 || c != 0 {
			t.Errorf("a commit of %d bytes: %d rounds, %d fdatasyncs, %d checkpoints; want 1, 1, 0", size, r, f, c)
		}
	}
}

// TestJournalWaitsForItsRound: a commit whose record a round already
// running took is durable when that round ends, and waits for it alone.
// Waiting, as groupSync's callers do, for a round that started after
// the call cost such a commit a second round, whatever it held: with
// commits arriving all the time, a second fdatasync.
func TestJournalWaitsForItsRound(t *testing.T) {
	ctx := context.Background()
	s := openDisk(t, t.TempDir(), Options{})
	defer s.Close()
	put(t, s, "warm", "v")
	syncing, release := make(chan struct{}), make(chan struct{})
	// The first round from here on is c's, and it waits for b to
	// hear of it: with a send that gave up when b was not yet
	// listening (c's round can get there first on a loaded machine),
	// c's round went on, and b waited for it for ever.
	var armed atomic.Bool
	s.jl.syncFile = func(f *os.File) error {
		if armed.CompareAndSwap(true, false) {
			syncing <- struct{}{}
			<-release
		}
		return f.Sync()
	}
	// b's record is appended and committed; before b waits, c's
	// commit starts a round that takes both records, and syncs.
	other := make(chan error, 1)
	var fired atomic.Bool // c's commit comes here too, and goes on
	s.afterCommit = func() {
		if fired.CompareAndSwap(false, true) {
			go func() {
				other <- s.Update(ctx, func(tx kv.Txn) error { return tx.Set([]byte("c"), []byte("v")) })
			}()
			<-syncing
		}
	}
	before := s.SyncStats()
	armed.Store(true)
	mine := make(chan error, 1)
	go func() {
		mine <- s.Update(ctx, func(tx kv.Txn) error { return tx.Set([]byte("b"), []byte("v")) })
	}()
	// Let b reach its wait while the round is in its fdatasync.
	time.Sleep(50 * time.Millisecond)
	close(release)
	for _, ch := range []chan error{mine, other} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	after := s.SyncStats()
	if r, f := after.Rounds-before.Rounds, after.Files-before.Files; r != 1 || f != 1 {
		t.Errorf("two commits in one round: %d rounds, %d fdatasyncs; want 1 and 1", r, f)
	}
}

// TestJournalReusesSlots: a long run of commits goes round the slots,
// checkpoints free them, and the journal's files stay within their
// slots' size.
func TestJournalReusesSlots(t *testing.T) {
	const slot = 32 << 10
	dir := t.TempDir()
	s := openDisk(t, dir, Options{journalSlot: slot})
	for i := range 200 {
		put(t, s, fmt.Sprint("k", i%50), strings.Repeat("x", 2000))
	}
	// The last epochs' checkpoints run in the background, and may still
	// run: read once they are done (read at once, a loaded machine saw
	// the checkpoint two epochs behind).
	epoch, cpFrom := checkpointsDone(s.jl)
	st := s.SyncStats()
	if epoch-cpFrom > 1 || st.Checkpoints < 8 {
		t.Errorf("after 200 commits of 2 KB in slots of 32 KiB: epoch %d, checkpoint at %d, %d checkpoints", epoch, cpFrom, st.Checkpoints)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(dir, journalDir))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if info.Size() > fillStep {
			t.Errorf("%s: %d bytes, want at most %d", e.Name(), info.Size(), fillStep)
		}
	}
	if len(entries) < 3 || len(entries) > journalSlots+1 {
		t.Errorf("journal holds %d files, want 2 or %d slots and the checkpoint", len(entries), journalSlots)
	}
	// Closed cleanly: nothing to replay.
	s = openDisk(t, dir, Options{journalSlot: slot})
	defer s.Close()
	if got := dump(t, s); len(got) != 50 {
		t.Errorf("%d keys after the reopen, want 50", len(got))
	}
}

func put(t *testing.T, s *DB, k, v string) {
	t.Helper()
	update(t, s, func(tx kv.Txn) error { return tx.Set([]byte(k), []byte(v)) })
}

func update(t *testing.T, s *DB, fn func(kv.Txn) error) {
	t.Helper()
	if err := s.Update(context.Background(), fn); err != nil {
		t.Error(err)
	}
}

// dump reads every key of s, with its value and whether it expires.
func dump(t *testing.T, s *DB) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := s.Export(context.Background(), nil, func(k, v []byte, exp time.Time) error {
		m[string(k)] = string(v) + fmt.Sprint(" expires:", !exp.IsZero())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func summary(m map[string]string) string {
	var b strings.Builder
	for k, v := range m {
		fmt.Fprintf(&b, "%s=%.20s ", k, v)
	}
	return b.String()
}

// firstSlotPath is the slot of the first epoch s's journal would replay,
// in the copy at dir; the row needs a later epoch after it.
func firstSlotPath(t *testing.T, s *DB, dir string) string {
	t.Helper()
	first := -1
	for i, sl := range s.jl.slots {
		if sl.epoch == s.jl.cpFrom {
			first = i
		}
	}
	if first < 0 || s.jl.epoch == s.jl.cpFrom {
		t.Fatalf("epochs %d to %d: the row wants two", s.jl.cpFrom, s.jl.epoch)
	}
	return filepath.Join(dir, journalDir, fmt.Sprint(first, ".slot"))
}

// slotPath is the current slot of s's journal, in the copy at dir.
func slotPath(s *DB, dir string) string {
	return filepath.Join(dir, journalDir, fmt.Sprint(s.jl.cur, ".slot"))
}

func flip(t *testing.T, name string, off int64) {
	t.Helper()
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x55
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// copyTree copies the regular files under src into dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o700)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		return copyFile(p, to)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// copyFile copies the file from to to.
func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// TestJournalBehindBadger: a crash can leave Badger holding commits
// whose records the journal lost (kill -9 keeps Badger's memory-mapped
// logs, whose pages the kernel has, but not the records appended since
// the last round; the kernel may also write those pages back before a
// power cut). Open takes such commits back (takeBack): the store reads
// as it did before them. A store whose checkpoint file an earlier berth
// wrote, without the version to take back above, keeps them, and the
// replay must not write what earlier records say over what they wrote.
// Either way the store never reads as half of a transaction, and an id
// of a lease only Badger kept is not handed out again. Each row commits,
// keeps a copy of the journal as the crash leaves it, commits again, and
// opens Badger's files of a clean close with the journal copied before,
// once as it is and once with the checkpoint file of an earlier berth.
func TestJournalBehindBadger(t *testing.T) {
	ctx := context.Background()
	// deleteK is a MOVE's commit: it deletes k and sets k2.
	deleteK := func(t *testing.T, s *DB) {
		update(t, s, func(tx kv.Txn) error {
			if err := tx.Delete([]byte("k")); err != nil {
				return err
			}
			return tx.Set([]byte("k2"), []byte("badger"))
		})
	}
	tests := []struct {
		name string
		opts Options
		// before runs before the journal is copied; after, after.
		before, after func(t *testing.T, s *DB)
		// crashed, if set, changes Badger's files as the crash left
		// them, before the replay opens them.
		crashed func(t *testing.T, dir string)
	}{
		{name: "a set over an earlier record's key", before: func(t *testing.T, s *DB) {
			put(t, s, "k", "record")
		}, after: func(t *testing.T, s *DB) {
			update(t, s, func(tx kv.Txn) error {
				if err := tx.Set([]byte("k"), []byte("badger")); err != nil {
					return err
				}
				return tx.Set([]byte("k2"), []byte("badger"))
			})
		}},
		// A MOVE whose record a kill kept in memory: replayed over,
		// the folder stood at its old name and its new one (the
		// daemon's TestKillRightAfterSmallWrites).
		{name: "a delete of an earlier record's key", before: func(t *testing.T, s *DB) {
			put(t, s, "k", "record")
		}, after: func(t *testing.T, s *DB) {
			deleteK(t, s)
		}},
		{name: "an unsynced delete that RunGC compacted away", before: func(t *testing.T, s *DB) {
			put(t, s, "k", "record")
			err := s.UpdateUnsynced(ctx, func(tx kv.Txn) error {
				if err := tx.Delete([]byte("k")); err != nil {
					return err
				}
				return tx.Set([]byte("k2"), []byte("badger"))
			})
			if err != nil {
				t.Fatal(err)
			}
			// The flush and the compaction leave Badger no trace of
			// k: the replay would take an earlier record's set of it
			// for the last word.
			if err := s.RunGC(ctx); err != nil {
				t.Fatal(err)
			}
		}, after: func(t *testing.T, s *DB) {}},
		{name: "a delete Badger's own flush compacts away", before: func(t *testing.T, s *DB) {
			put(t, s, "k", "record")
		}, after: func(t *testing.T, s *DB) {
			deleteK(t, s)
			// As a full memtable does, before the next round: Badger
			// flushes it and compacts level 0 (DropPrefix does both).
			if err := s.db.Update(func(tx *dgraph.Txn) error { return tx.Set([]byte("\x00test"), nil) }); err != nil {
				t.Fatal(err)
			}
			if err := s.db.DropPrefix([]byte("\x00test")); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "a delete the replay's own flushes compact away", opts: Options{MemTableSize: 1 << 20}, before: func(t *testing.T, s *DB) {
			// Records that fill memtables at the replay, whose flushes
			// start a compaction before it reaches k's record.
			val := strings.Repeat("f", 500)
			for i := range 240 {
				update(t, s, func(tx kv.Txn) error {
					for j := range 100 {
						if err := tx.Set(fmt.Appendf(nil, "fill/%03d/%03d", i, j), []byte(val)); err != nil {
							return err
						}
					}
					return nil
				})
			}
			// Level 0 empty: its tables at the start are k's alone.
			if err := s.RunGC(ctx); err != nil {
				t.Fatal(err)
			}
			put(t, s, "k", "record")
		}, after: func(t *testing.T, s *DB) {
			deleteK(t, s)
			put(t, s, "z", "later")
		}},
		// Badger flushes the memtables of its logs as it opens, and a
		// compaction due then drops the delete unless nothing compacts
		// before the replay has read k's version (replayJournal).
		{name: "a delete a compaction at the start drops", opts: Options{
			MemTableSize: 1 << 20,
			// The replay reads versions once a compaction due at the
			// start has run, in a Badger that runs any.
			beforeVersions: func(db *dgraph.DB) {
				if db.Opts().NumCompactors == 0 {
					return
				}
				l0 := func() int { return db.Levels()[0].NumTables }
				n := l0()
				for deadline := time.Now().Add(10 * time.Second); l0() >= n && time.Now().Before(deadline); {
					time.Sleep(10 * time.Millisecond)
				}
			},
		}, before: func(t *testing.T, s *DB) {
			put(t, s, "k", "record")
		}, after: deleteK, crashed: func(t *testing.T, dir string) {
			// Level 0 over the count that makes it the next
			// compaction's, as the memtables a crash leaves make it:
			// written with compactions off, under the engine's prefix,
			// which a dump leaves out.
			raw, err := dgraph.Open(withoutCompactions(dgraph.DefaultOptions(dir).
				WithMemTableSize(1 << 20).WithValueThreshold(valueThreshold).
				WithValueLogFileSize(valueLogFileSize).WithLogger(nil)))
			if err != nil {
				t.Fatal(err)
			}
			val := []byte(strings.Repeat("f", 100))
			for i := range 60 {
				err := raw.Update(func(tx *dgraph.Txn) error {
					for j := range 1000 {
						if err := tx.Set(fmt.Appendf(nil, "%sfill/%02d/%04d", kv.EnginePrefix, i, j), val); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			if err := raw.Close(); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "a TTL entry over an earlier record's key", before: func(t *testing.T, s *DB) {
			put(t, s, "k", "record")
		}, after: func(t *testing.T, s *DB) {
			update(t, s, func(tx kv.Txn) error {
				if err := tx.SetTTL([]byte("k"), []byte("badger"), time.Hour); err != nil {
					return err
				}
				return tx.Set([]byte("k2"), []byte("badger"))
			})
		}},
		{name: "ids of a lease Badger alone kept", before: func(t *testing.T, s *DB) {
			if _, err := s.NextID(ctx, "node"); err != nil {
				t.Fatal(err)
			}
			put(t, s, "k", "record")
		}, after: func(t *testing.T, s *DB) {
			var id uint64
			for range seqBandwidth + 10 {
				var err error
				if id, err = s.NextID(ctx, "node"); err != nil {
					t.Fatal(err)
				}
			}
			put(t, s, "used", fmt.Sprint(id))
		}},
	}
	for _, tc := range tests {
		for _, earlier := range []bool{false, true} {
			name := tc.name
			if earlier {
				name += ", an earlier berth's checkpoint"
			}
			t.Run(name, func(t *testing.T) {
				dir, snap, jcopy := t.TempDir(), t.TempDir(), t.TempDir()
				s := openDisk(t, dir, tc.opts)
				put(t, s, "base", "before")
				tc.before(t, s)
				// The journal as the crash leaves it.
				copyTree(t, filepath.Join(dir, journalDir), jcopy)
				before := dump(t, s)
				tc.after(t, s)
				after := dump(t, s)
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				copyTree(t, dir, snap)
				if tc.crashed != nil {
					tc.crashed(t, snap)
				}
				if err := os.RemoveAll(filepath.Join(snap, journalDir)); err != nil {
					t.Fatal(err)
				}
				copyTree(t, jcopy, filepath.Join(snap, journalDir))
				want := before
				if earlier {
					// Badger kept every commit after the journal's
					// copy (it closed cleanly): the replay must leave
					// them whole.
					earlierCheckpoint(t, snap)
					want = after
				}

				r := openDisk(t, snap, tc.opts)
				defer r.Close()
				got := dump(t, r)
				if !maps.Equal(got, want) {
					t.Fatalf("after the replay:\n%v\nwant\n%v", summary(got), summary(want))
				}
				// The lease's row: the id used after the journal's copy,
				// where the store kept it.
				used, ok := got["used"]
				if !ok {
					return
				}
				id, err := r.NextID(ctx, "node")
				if err != nil {
					t.Fatal(err)
				}
				n, err := strconv.ParseUint(strings.Fields(used)[0], 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				if id <= n {
					t.Errorf("NextID after the replay = %d, already used: %s", id, used)
				}
			})
		}
	}
}

// earlierCheckpoint writes the checkpoint file of the store in dir as
// berth wrote it before the mark: its epoch alone. That berth must read
// the file as its own first (its readCheckpoint: unstamp of one field),
// or a store cannot go back to it: it refused the file as damage.
func earlierCheckpoint(t *testing.T, dir string) {
	t.Helper()
	name := filepath.Join(dir, journalDir, "checkpoint")
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	f, ok := unstamp(b, 1)
	if !ok {
		t.Fatalf("an earlier berth does not read the checkpoint file %x", b)
	}
	if err := os.WriteFile(name, stamp(f[0]), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestJournalReplayWithoutSync: a store opened with NoSync after a
// crash of a synced run replays the journal too. It read as it was
// before the commits only the journal held, and a later synced open
// replayed those over what the NoSync run had written since.
func TestJournalReplayWithoutSync(t *testing.T) {
	dir, snap := t.TempDir(), t.TempDir()
	s := openDisk(t, dir, Options{})
	put(t, s, "a", "1")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	copyTree(t, dir, snap) // Badger's files as a power cut leaves them
	s = openDisk(t, dir, Options{})
	defer s.Close()
	put(t, s, "b", "2")
	if err := os.RemoveAll(filepath.Join(snap, journalDir)); err != nil {
		t.Fatal(err)
	}
	copyTree(t, filepath.Join(dir, journalDir), filepath.Join(snap, journalDir))

	r := openDisk(t, snap, Options{NoSync: true})
	if got := dump(t, r); got["b"] != "2 expires:false" {
		t.Errorf("NoSync after the crash: b = %q, want 2", got["b"])
	}
	update(t, r, func(tx kv.Txn) error { return tx.Delete([]byte("b")) })
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r = openDisk(t, snap, Options{})
	defer r.Close()
	if got := dump(t, r); got["b"] != "" || got["a"] != "1 expires:false" {
		t.Errorf("the synced open after: %v, want a=1 and no b", summary(got))
	}
}

// TestJournalEpochAfterLostHeader: a power cut during the round that
// starts an epoch can keep the round's records and lose the slot's
// header, which the same fdatasync would have made durable. The next
// run must not seal its records for that epoch again: in the same slot,
// a record of the run cut short would then read as the next one of the
// new run, and a later crash would replay a commit that was never
// acknowledged over the new run's.
func TestJournalEpochAfterLostHeader(t *testing.T) {
	ctx := context.Background()
	const slot = 16 << 10
	dir, snap, last := t.TempDir(), t.TempDir(), t.TempDir()
	s := openDisk(t, dir, Options{journalSlot: slot})
	hold := make(chan struct{})
	s.jl.beforeCheckpoint = func() { <-hold }
	put(t, s, "x", strings.Repeat("x", 10<<10))
	first := s.jl.cur
	// One round: a, then a commit never acknowledged, then one whose
	// size makes its slot the one the next run picks first; it starts
	// the next epoch.
	unsynced := func(k, v string) {
		if err := s.UpdateUnsynced(ctx, func(tx kv.Txn) error { return tx.Set([]byte(k), []byte(v)) }); err != nil {
			t.Fatal(err)
		}
	}
	unsynced("a", "a")
	unsynced("zombie", "never acknowledged")
	put(t, s, "c", strings.Repeat("c", 1<<20+100))
	if s.jl.cur == first {
		t.Fatal("the round did not start an epoch")
	}
	copyTree(t, filepath.Join(dir, journalDir), filepath.Join(snap, journalDir))
	// The crash: the new slot's header block is not on disk.
	f, err := os.OpenFile(slotPath(s, snap), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, slotHeader), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	close(hold)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// The next run commits a record of a's size, and crashes.
	r := openDisk(t, snap, Options{journalSlot: slot})
	put(t, r, "a", "a")
	copyTree(t, filepath.Join(snap, journalDir), filepath.Join(last, journalDir))
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(snap, journalDir)); err != nil {
		t.Fatal(err)
	}
	copyTree(t, filepath.Join(last, journalDir), filepath.Join(snap, journalDir))

	r = openDisk(t, snap, Options{journalSlot: slot})
	defer r.Close()
	if got := dump(t, r); got["zombie"] != "" {
		t.Errorf("after the second crash: zombie=%s, a commit the first crash cut", got["zombie"])
	}
}

// TestJournalOpenSyncsBadger: after kill -9, Badger may hold commits that
// no record holds (kill -9 keeps what the kernel has). Open takes them
// back, in commits of its own; from a checkpoint file of an earlier
// berth it cannot, and with nothing to replay it serves them all the
// same. Either way a commit acknowledged next may build on what Open
// left (a file in a folder created just before the crash), so Open makes
// Badger's logs durable before it returns, or a power cut later keeps
// the file and loses its folder.
func TestJournalOpenSyncsBadger(t *testing.T) {
	for _, earlier := range []bool{false, true} {
		t.Run(fmt.Sprint("earlier checkpoint ", earlier), func(t *testing.T) {
			dir, snap, jcopy := t.TempDir(), t.TempDir(), t.TempDir()
			s := openDisk(t, dir, Options{})
			copyTree(t, filepath.Join(dir, journalDir), jcopy)
			put(t, s, "folder", "created just before the crash")
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			copyTree(t, dir, snap)
			if err := os.RemoveAll(filepath.Join(snap, journalDir)); err != nil {
				t.Fatal(err)
			}
			copyTree(t, jcopy, filepath.Join(snap, journalDir))
			if earlier {
				earlierCheckpoint(t, snap)
			}

			r := openDisk(t, snap, Options{})
			defer r.Close()
			if _, ok := dump(t, r)["folder"]; ok != earlier {
				t.Fatalf("the commit Badger kept: there %v, want %v", ok, earlier)
			}
			if st := r.SyncStats(); st.Checkpoints == 0 {
				t.Errorf("Open synced none of Badger's logs: %+v", st)
			}
		})
	}
}

// TestJournalRoundsDuringFlush: while RunGC flushes the memtables
// (flushDeletes holds writes), a commit waits to write to Badger, and it
// must not wait holding the journal's lock: the round that acknowledges
// the commits made before would wait for the flush too.
func TestJournalRoundsDuringFlush(t *testing.T) {
	ctx := context.Background()
	s := openDisk(t, t.TempDir(), Options{})
	defer s.Close()
	// A commit waiting for its round.
	if err := s.UpdateUnsynced(ctx, func(tx kv.Txn) error { return tx.Set([]byte("before"), []byte("v")) }); err != nil {
		t.Fatal(err)
	}
	s.writes.Lock() // as flushDeletes does
	blocked := make(chan error, 1)
	go func() {
		blocked <- s.Update(ctx, func(tx kv.Txn) error { return tx.Set([]byte("during"), []byte("v")) })
	}()
	// Let the commit reach Badger's lock; there it waits either way.
	time.Sleep(100 * time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- s.jl.wait(s.jl.appended()) }()
	waited := false
	select {
	case err := <-done:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(10 * time.Second):
		t.Error("the round waited for the flush")
		waited = true
	}
	s.writes.Unlock()
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}
	if waited {
		<-done
	}
}

// TestJournalReplayCutShort: a crash during a replay leaves Badger with
// what the replay wrote, at versions above those of the records still
// to replay. The next replay must not take those for later commits' and
// keep a replayed value over a later record's. Badger here kept the
// commits up to a point (as kill -9 leaves it, copied while the store
// runs), the first replay is cut after the records up to that point,
// and the last record, acknowledged, sets the key again.
func TestJournalReplayCutShort(t *testing.T) {
	tests := []struct {
		name string
		// undone: an earlier replay ran over the commits after the
		// point too (a kill kept them in the page cache), and a power
		// cut took them back, with what it wrote, before the replay
		// that is cut: its view of Badger is no bound on the versions
		// the next replays write.
		undone bool
	}{
		{name: "cut once"},
		{name: "after a replay that a power cut took back", undone: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir, kept, partial, killed := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
			s := openDisk(t, dir, Options{})
			put(t, s, "a", "1")
			put(t, s, "b", "1")
			put(t, s, "k", "old")
			put(t, s, "c", "1")
			copyTree(t, dir, kept) // Badger kept these commits
			jpartial := filepath.Join(partial, journalDir)
			copyTree(t, filepath.Join(dir, journalDir), jpartial)
			put(t, s, "k", "new")
			for i := range 10 {
				put(t, s, fmt.Sprint("later", i), "1")
			}
			copyTree(t, dir, killed) // the page cache at a kill
			jfull := t.TempDir()
			copyTree(t, filepath.Join(dir, journalDir), jfull)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			// replace puts journal in place of kept's, but for what the replay
			// wrote beside the records, which the crash keeps.
			replace := func(journal string) {
				t.Helper()
				own, _ := os.ReadFile(filepath.Join(kept, journalDir, "replaying"))
				if err := os.RemoveAll(filepath.Join(kept, journalDir)); err != nil {
					t.Fatal(err)
				}
				copyTree(t, journal, filepath.Join(kept, journalDir))
				if own != nil {
					if err := os.WriteFile(filepath.Join(kept, journalDir, "replaying"), own, 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			if tc.undone {
				// The replay after the kill, whose Badger files the
				// power cut takes back: only its own file stays.
				if err := os.RemoveAll(filepath.Join(killed, journalDir)); err != nil {
					t.Fatal(err)
				}
				copyTree(t, jfull, filepath.Join(killed, journalDir))
				r := openDisk(t, killed, Options{})
				if err := r.Close(); err != nil {
					t.Fatal(err)
				}
				own, err := os.ReadFile(filepath.Join(killed, journalDir, "replaying"))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(kept, journalDir, "replaying"), own, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			// The first replay, cut after the records Badger kept: Badger's
			// files as it leaves them, with the journal of the crash.
			replace(jpartial)
			r := openDisk(t, kept, Options{})
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			replace(jfull)
			r = openDisk(t, kept, Options{})
			defer r.Close()
			if got := dump(t, r)["k"]; got != "new expires:false" {
				t.Errorf("k = %q after the second replay, want new", got)
			}
		})
	}
}

// TestJournalMendsValues: after a power cut, Badger's write-ahead log can
// hold a commit whose value, in the value log, never reached the disk
// (the kernel writes the two memory maps back in any order). Open sets an
// acknowledged commit's key again from the journal, and takes back a
// commit never acknowledged, whose record the cut lost: its key read as
// an error, and an earlier value acknowledged under it was lost with it.
func TestJournalMendsValues(t *testing.T) {
	ctx := context.Background()
	big := strings.Repeat("large value ", 6000)
	newer := strings.Repeat("newer value ", 6000)
	tests := []struct {
		name string
		// commit writes what the cut finds, after a clean reopen.
		commit func(t *testing.T, s *DB)
		want   map[string]string
	}{
		{name: "an acknowledged commit", commit: func(t *testing.T, s *DB) {
			put(t, s, "big", big)
			put(t, s, "b", "small")
		}, want: map[string]string{"a": "small", "b": "small", "big": big}},
		{name: "a commit not acknowledged, over an acknowledged value", commit: func(t *testing.T, s *DB) {
			err := s.UpdateUnsynced(ctx, func(tx kv.Txn) error {
				if err := tx.Set([]byte("a"), []byte(newer)); err != nil {
					return err
				}
				return tx.Set([]byte("b"), []byte("unacknowledged"))
			})
			if err != nil {
				t.Fatal(err)
			}
		}, want: map[string]string{"a": "small"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cut := powerCut(t, putSmall, tc.commit)
			r := openDisk(t, cut, Options{})
			defer r.Close()
			err := r.View(ctx, func(tx kv.Txn) error {
				for k, want := range tc.want {
					v, err := tx.Get([]byte(k))
					if err != nil {
						return fmt.Errorf("%s: %w", k, err)
					}
					if string(v) != want {
						return fmt.Errorf("%s reads %.20q (%d bytes), want %.20q", k, v, len(v), want)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := dump(t, r); len(got) != len(tc.want) {
				t.Errorf("after the power cut: %v", summary(got))
			}
		})
	}
}

// powerCut returns a copy of a store holding what before writes (closed,
// then opened again) and what commit does after it, as a power cut leaves
// it after commit: every page of Badger's logs but those of the value log
// written after the reopen (a value-log file commit's GC removed is back,
// as the sync it was waiting for never came).
func powerCut(t *testing.T, before, commit func(t *testing.T, s *DB)) string {
	t.Helper()
	dir, cut, vlogs := t.TempDir(), t.TempDir(), t.TempDir()
	s := openDisk(t, dir, Options{})
	before(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	copyVlogs := func(from, to string) {
		t.Helper()
		for _, name := range mustGlob(t, from, "*.vlog") {
			if err := copyFile(name, filepath.Join(to, filepath.Base(name))); err != nil {
				t.Fatal(err)
			}
		}
	}
	s = openDisk(t, dir, Options{})
	copyVlogs(dir, vlogs) // as the reopen left them, synced
	commit(t, s)
	copyTree(t, dir, cut)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range mustGlob(t, cut, "*.vlog") {
		if _, err := os.Stat(filepath.Join(vlogs, filepath.Base(name))); err != nil {
			t.Fatalf("value log %s is new since the reopen: %v", filepath.Base(name), err)
		}
	}
	copyVlogs(vlogs, cut)
	return cut
}

// TestDamagedValueReads: a value Badger's entry points to that a power
// cut kept from the value log reads as kv.ErrDamaged, where Badger hands
// out empty bytes. Open takes back such a value of a commit never
// acknowledged; from a checkpoint file of an earlier berth it cannot,
// and every way of reading the key must say so.
func TestDamagedValueReads(t *testing.T) {
	ctx := context.Background()
	cut := powerCut(t, putSmall, func(t *testing.T, s *DB) {
		err := s.UpdateUnsynced(ctx, func(tx kv.Txn) error {
			return tx.Set([]byte("a"), []byte(strings.Repeat("newer value ", 6000)))
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	earlierCheckpoint(t, cut)
	r := openDisk(t, cut, Options{})
	defer r.Close()
	nothing := func([]byte, []byte) error { return nil }
	tests := []struct {
		name string
		read func() error
	}{
		{name: "Get", read: func() error {
			return r.View(ctx, func(tx kv.Txn) error {
				_, err := tx.Get([]byte("a"))
				return err
			})
		}},
		{name: "Get in an Update", read: func() error {
			return r.Update(ctx, func(tx kv.Txn) error {
				_, err := tx.Get([]byte("a"))
				return err
			})
		}},
		{name: "Scan", read: func() error {
			return r.View(ctx, func(tx kv.Txn) error { return tx.Scan([]byte("a"), nil, nothing) })
		}},
		{name: "ScanReverse", read: func() error {
			return r.View(ctx, func(tx kv.Txn) error { return tx.ScanReverse([]byte("a"), nil, nothing) })
		}},
		{name: "Export", read: func() error {
			return r.Export(ctx, nil, func([]byte, []byte, time.Time) error { return nil })
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.read(); !errors.Is(err, kv.ErrDamaged) {
				t.Errorf("err = %v, want kv.ErrDamaged", err)
			}
		})
	}
}

// putSmall is the store powerCut's rows start from: "a" = "small".
func putSmall(t *testing.T, s *DB) { put(t, s, "a", "small") }

func mustGlob(t *testing.T, dir, pattern string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestJournalBacklog: unsynced commits alone (pins, sequence leases) do
// not grow the journal's buffer without bound: past maxBacklog one waits
// for a round.
func TestJournalBacklog(t *testing.T) {
	ctx := context.Background()
	s := openDisk(t, t.TempDir(), Options{})
	defer s.Close()
	val := strings.Repeat("v", 4<<10)
	most := 0
	for i := range 1000 { // 4 MiB of records
		err := s.UpdateUnsynced(ctx, func(tx kv.Txn) error { return tx.Set([]byte(fmt.Sprint("k", i)), []byte(val)) })
		if err != nil {
			t.Fatal(err)
		}
		most = max(most, s.jl.backlog())
	}
	if most > maxBacklog+8<<10 {
		t.Errorf("the journal held %d bytes of records no round took, want at most about %d", most, maxBacklog)
	}
}

// checkpointsDone waits until the checkpoints asked for so far have run
// and returns the current epoch and the first one a replay would read.
func checkpointsDone(j *journal) (epoch, cpFrom uint64) {
	j.rmu.Lock()
	defer j.rmu.Unlock()
	for j.cpRunning {
		j.cond.Wait()
	}
	return j.epoch, j.cpFrom
}
