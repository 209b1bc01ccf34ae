package badger

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	dgraph "github.com/dgraph-io/badger/v4"

	"berth/kv"
)

// Concurrent commits share journal rounds, and each still returns only
// after a round that started after it committed.
func TestGroupSyncShares(t *testing.T) {
	b, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const n = 64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			err := b.Update(context.Background(), func(tx kv.Txn) error {
				return tx.Set([]byte(fmt.Sprint("k", i)), []byte("v"))
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	b.jl.rmu.Lock()
	rounds := b.jl.done
	b.jl.rmu.Unlock()
	t.Logf("%d commits, %d fsync rounds", n, rounds)
	if rounds == 0 || rounds >= n {
		t.Fatalf("%d commits took %d sync rounds", n, rounds)
	}
	// SyncStats counts what the metrics report: every commit waited, and
	// a commit waits at least as long as the round that covers it.
	st := b.SyncStats()
	if st.Commits != n || st.Rounds != rounds || st.Files < rounds {
		t.Errorf("SyncStats = %+v after %d commits in %d rounds", st, n, rounds)
	}
	if st.RoundTime <= 0 || st.WaitTime < st.RoundTime/time.Duration(rounds) {
		t.Errorf("SyncStats: rounds took %v, commits waited %v", st.RoundTime, st.WaitTime)
	}
}

// TestGroupSyncSettles: a round syncs every log it has not settled; an
// older log is settled once synced after a newer one of its kind appeared,
// and forgotten when Badger deletes it.
func TestGroupSyncSettles(t *testing.T) {
	dir := t.TempDir()
	touch := func(names ...string) {
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	g := newGroupSync(dir)
	round := func(wantSettled ...string) {
		t.Helper()
		if err := g.syncFiles(); err != nil {
			t.Fatal(err)
		}
		var got []string
		for n := range g.settled {
			got = append(got, n)
		}
		slices.Sort(got)
		slices.Sort(wantSettled)
		if !slices.Equal(got, wantSettled) {
			t.Fatalf("settled %v, want %v", got, wantSettled)
		}
	}
	touch("00001.mem", "000001.vlog", "MANIFEST", "000001.sst")
	round()
	touch("00002.mem")
	round("00001.mem")
	touch("000002.vlog", "00003.mem")
	round("00001.mem", "00002.mem", "000001.vlog")
	if err := os.Remove(filepath.Join(dir, "00001.mem")); err != nil {
		t.Fatal(err)
	}
	round("00002.mem", "000001.vlog")
}

// TestSyncFailureStopsWrites: once a commit could not be made durable,
// Update fails with kv.ErrNotDurable, for that commit and every later one,
// even when fsync works again (Linux reports a writeback error once, then
// succeeds over the lost pages); a later commit does not even reach the
// memtable, so no reader sees it. Reads go on. The failure may be the
// journal's own fdatasync, or that of Badger's logs in a checkpoint,
// after which the journal could not reuse its space. Closed and opened
// again, the store still holds what was acknowledged before the failure.
func TestSyncFailureStopsWrites(t *testing.T) {
	eio := errors.New("input/output error")
	for _, tc := range []struct {
		name string
		// lost: the failed round's records never reached the disk
		// (the journal's, where a checkpoint's leaves them durable).
		lost bool
		fail func(s *DB, on bool)
	}{
		{"journal", true, func(s *DB, on bool) {
			s.jl.rmu.Lock()
			defer s.jl.rmu.Unlock()
			s.jl.syncFile = nil
			if on {
				s.jl.syncFile = func(*os.File) error { return eio }
			}
		}},
		{"checkpoint", false, func(s *DB, on bool) {
			s.group.mu.Lock()
			defer s.group.mu.Unlock()
			s.group.syncFile = fdatasync
			if on {
				s.group.syncFile = func(string) error { return eio }
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			// Slots of 8 KiB: the puts below fill one and start a
			// checkpoint.
			dir := t.TempDir()
			s := openDisk(t, dir, Options{journalSlot: 8 << 10})
			defer s.Close()
			// Each commit also sets k, acknowledged first as "before".
			put := func(k string) error {
				return s.Update(ctx, func(tx kv.Txn) error {
					if err := tx.Set([]byte("k"), []byte(k)); err != nil {
						return err
					}
					return tx.Set([]byte(k), make([]byte, 3<<10))
				})
			}
			if err := put("before"); err != nil || s.Failed() != nil {
				t.Fatalf("healthy store: %v, %v", err, s.Failed())
			}
			// Closed and opened again: k's value is in Badger alone.
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openDisk(t, dir, Options{journalSlot: 8 << 10})
			defer s.Close()
			jcopy := t.TempDir() // the journal as the acknowledged rounds left it
			copyTree(t, filepath.Join(dir, journalDir), jcopy)
			tc.fail(s, true)
			var err error
			for i := 0; i < 16 && err == nil; i++ {
				err = put(fmt.Sprint("lost", i))
			}
			if !errors.Is(err, kv.ErrNotDurable) || !errors.Is(err, eio) {
				t.Fatalf("commit after the failed fsync: %v, want kv.ErrNotDurable wrapping the cause", err)
			}
			tc.fail(s, false)
			if err := put("after"); !errors.Is(err, kv.ErrNotDurable) {
				t.Fatalf("commit after the failure: %v, want kv.ErrNotDurable", err)
			}
			if !errors.Is(s.Failed(), kv.ErrNotDurable) {
				t.Fatalf("Failed: %v", s.Failed())
			}
			err = s.View(ctx, func(tx kv.Txn) error {
				if _, err := tx.Get([]byte("before")); err != nil {
					return fmt.Errorf("before: %w", err)
				}
				if _, err := tx.Get([]byte("after")); !errors.Is(err, kv.ErrNotFound) {
					return fmt.Errorf("after: %v, want it never committed", err)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			// The next Open takes back the commits no durable record
			// holds, setting k back to its value at the line: a
			// compaction as Badger closes (its last memtable flush can
			// fill level 0) must not have dropped that value for k's
			// later, failed ones.
			s.beforeBadgerClose = func() {
				if err := s.db.Update(func(tx *dgraph.Txn) error { return tx.Set([]byte("\x00test"), nil) }); err != nil {
					t.Fatal(err)
				}
				if err := s.db.DropPrefix([]byte("\x00test")); err != nil {
					t.Fatal(err)
				}
			}
			s.Close() // reports the failure
			if tc.lost {
				if err := os.RemoveAll(filepath.Join(dir, journalDir)); err != nil {
					t.Fatal(err)
				}
				copyTree(t, jcopy, filepath.Join(dir, journalDir))
			}
			r := openDisk(t, dir, Options{journalSlot: 8 << 10})
			defer r.Close()
			got := dump(t, r)["k"]
			if got == "" {
				t.Fatalf("k, acknowledged before the failure, is gone after the reopen: %v", summary(dump(t, r)))
			}
		})
	}
}

// TestGroupSyncKeepsLogsOpen: rounds keep the logs they sync open, open a
// name again when it lists another file, and close a log once it is
// settled or gone.
func TestGroupSyncKeepsLogsOpen(t *testing.T) {
	dir := t.TempDir()
	write := func(name string) uint64 {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	g := newGroupSync(dir)
	defer g.close()
	round := func(want map[string]uint64) {
		t.Helper()
		if err := g.syncFiles(); err != nil {
			t.Fatal(err)
		}
		got := map[string]uint64{}
		for name, l := range g.logs {
			got[name] = l.ino
		}
		if !maps.Equal(got, want) {
			t.Fatalf("open logs %v, want %v", got, want)
		}
	}
	mem, vlog := write("00001.mem"), write("000001.vlog")
	write("MANIFEST")
	round(map[string]uint64{"00001.mem": mem, "000001.vlog": vlog})
	round(map[string]uint64{"00001.mem": mem, "000001.vlog": vlog})
	if err := os.Remove(filepath.Join(dir, "00001.mem")); err != nil {
		t.Fatal(err)
	}
	// A new file of the old name: another inode, since the round's
	// open file keeps the old one's number taken.
	mem = write("00001.mem")
	round(map[string]uint64{"00001.mem": mem, "000001.vlog": vlog})
	mem2 := write("00002.mem")
	round(map[string]uint64{"00002.mem": mem2, "000001.vlog": vlog}) // 00001.mem settled
	if err := os.Remove(filepath.Join(dir, "000001.vlog")); err != nil {
		t.Fatal(err)
	}
	round(map[string]uint64{"00002.mem": mem2})
}
