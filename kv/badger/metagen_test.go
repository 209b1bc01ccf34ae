package badger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"berth/kv"
	"berth/kv/kvtest"
)

// TestMetaGeneration: commits that write content keys only (kv.Content)
// leave MetaGeneration where it was and move Generation; a commit that
// writes or deletes any other key moves both, after its writes are
// visible, as TestCacheDuringCommit checks for Generation.
func TestMetaGeneration(t *testing.T) {
	content, meta := []byte("C/\x00\x01name"), []byte("acctperson/\x00\x01")
	rows := []struct {
		name  string
		write func(tx kv.Txn) error
		moves bool
	}{
		{"content set", func(tx kv.Txn) error { return tx.Set(content, []byte("v")) }, false},
		{"content delete", func(tx kv.Txn) error { return tx.Delete(content) }, false},
		{"activity record", func(tx kv.Txn) error { return tx.Set([]byte(kv.ActivityRecord+"\x01"), []byte("v")) }, false},
		{"account set", func(tx kv.Txn) error { return tx.Set(meta, []byte("v")) }, true},
		{"account delete", func(tx kv.Txn) error { return tx.Delete(meta) }, true},
		{"root record", func(tx kv.Txn) error { return tx.Set([]byte(kv.VFSRoot+"\x01"), []byte("v")) }, true},
		{"top folder", func(tx kv.Txn) error { return tx.Set([]byte(kv.VFSTop+"\x01"), []byte("v")) }, true},
		{"content with meta", func(tx kv.Txn) error {
			if err := tx.Set(content, []byte("w")); err != nil {
				return err
			}
			return tx.Set(meta, []byte("w"))
		}, true},
	}
	eachStore(t, func(t *testing.T, s *DB) {
		ctx := context.Background()
		for _, r := range rows {
			g0, m0 := s.Generation(), s.MetaGeneration()
			if err := s.Update(ctx, r.write); err != nil {
				t.Fatalf("%s: %v", r.name, err)
			}
			if g := s.Generation(); g != g0+1 {
				t.Errorf("%s: generation %d, want %d", r.name, g, g0+1)
			}
			if m := s.MetaGeneration(); (m != m0) != r.moves {
				t.Errorf("%s: meta generation went from %d to %d, want moved %v", r.name, m0, m, r.moves)
			}
		}
		m0 := s.MetaGeneration()
		err := s.Update(ctx, func(tx kv.Txn) error {
			tx.Set(meta, []byte("lost"))
			return errors.New("no")
		})
		if err == nil || s.MetaGeneration() != m0 {
			t.Fatalf("a failed Update: %v, meta generation %d, want %d", err, s.MetaGeneration(), m0)
		}
		// A reader in the window between a meta commit becoming
		// visible and its count gets a number no earlier reader had.
		s.afterCommit = func() {
			if g := s.MetaGeneration(); g == m0 {
				t.Errorf("during a meta commit: meta generation %d, as before it", g)
			}
		}
		kvtest.Set(t, s, meta, []byte("x"))
		s.afterCommit = nil
	})
}

// TestGetRemembers: a transaction that reads a key again gets what it
// read, or what it wrote or deleted since, and a caller that changes the
// slice it got changes nothing that a later read returns.
func TestGetRemembers(t *testing.T) {
	eachStore(t, func(t *testing.T, s *DB) {
		ctx := context.Background()
		k, absent := []byte("k"), []byte("absent")
		kvtest.Set(t, s, k, []byte("one"))
		get := func(tx kv.Txn, key []byte) string {
			t.Helper()
			v, err := tx.Get(key)
			if errors.Is(err, kv.ErrNotFound) {
				return "<none>"
			}
			if err != nil {
				t.Fatal(err)
			}
			return string(v)
		}
		before := s.TxnStats()
		err := s.Update(ctx, func(tx kv.Txn) error {
			steps := []struct {
				do   func() error
				key  []byte
				want string
			}{
				{nil, k, "one"},
				{nil, k, "one"},
				{nil, absent, "<none>"},
				{nil, absent, "<none>"},
				{func() error { return tx.Set(k, []byte("two")) }, k, "two"},
				{func() error { return tx.Set(absent, []byte("here")) }, absent, "here"},
				{func() error { return tx.Delete(k) }, k, "<none>"},
				{func() error { return tx.Set(k, []byte("three")) }, k, "three"},
			}
			for i, st := range steps {
				if st.do != nil {
					if err := st.do(); err != nil {
						return err
					}
				}
				v, err := tx.Get(st.key)
				if err == nil {
					clear(v) // the caller's copy
				}
				if got := get(tx, st.key); got != st.want {
					t.Errorf("step %d: %s is %q, want %q", i, st.key, got, st.want)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n := s.TxnStats().Gets - before.Gets; n != 16 {
			t.Errorf("%d reads counted, want 16", n)
		}
		if err := s.View(ctx, func(tx kv.Txn) error {
			if got := get(tx, k); got != "three" {
				t.Errorf("after the commit: %q", got)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestGetRemembersFew: a transaction that reads many keys once each (a
// listing) keeps at most maxMemoKeys of them, and still reads every one
// right, its own writes included.
func TestGetRemembersFew(t *testing.T) {
	ctx := context.Background()
	s := openMemory(t, Options{})
	n := 2 * maxMemoKeys
	if err := s.Update(ctx, func(tx kv.Txn) error {
		for i := range n {
			if err := tx.Set([]byte(fmt.Sprint("k", i)), []byte(fmt.Sprint("v", i))); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, func(tx kv.Txn) error {
		for pass := range 2 {
			for i := range n {
				k := []byte(fmt.Sprint("k", i))
				v, err := tx.Get(k)
				if want := fmt.Sprint("v", i, strings.Repeat("x", pass)); err != nil || string(v) != want {
					t.Fatalf("pass %d, key %d: %q, %v; want %q", pass, i, v, err, want)
				}
				if pass == 0 {
					if err := tx.Set(k, []byte(fmt.Sprint("v", i, "x"))); err != nil {
						return err
					}
				}
			}
		}
		if got := len(tx.(*txn).memo); got != maxMemoKeys {
			t.Errorf("%d keys remembered, want %d", got, maxMemoKeys)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
