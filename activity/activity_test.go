package activity_test

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"berth/activity"
	"berth/kv"
	"berth/kv/badger"
)

func openLog(t *testing.T, o activity.Options) (*activity.Log, kv.Store) {
	t.Helper()
	db := openBench(t)
	return activity.New(db, o), db
}

// openBench opens a real Badger in a temp directory, commits unsynced.
func openBench(t testing.TB) kv.Store {
	t.Helper()
	db, err := badger.Open(badger.Options{Dir: t.TempDir(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func note(t *testing.T) uint64 {
	t.Helper()
	typ, ok := activity.TypeNamed(activity.Note)
	if !ok {
		t.Fatal("no note type")
	}
	return typ.ID
}

func TestAppendIndexesAndPages(t *testing.T) {
	ctx := context.Background()
	l, _ := openLog(t, activity.Options{})
	nt := note(t)
	// org 1 person 10 acts on person 20 of org 2, and on themselves.
	var ids []uint64
	var created []time.Time
	for i := range 5 {
		r := activity.Record{ActorType: "person", ActorCompanyID: 1, ActorPersonID: 10, ActedOnType: "person",
			ActedOnCompanyID: 2, ActedOnPersonID: 20, ActivityTypeID: nt, DataText: "x"}
		if i%2 == 1 {
			r.ActedOnCompanyID, r.ActedOnPersonID = 1, 10
		}
		got, err := l.Create(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if got.ID == 0 || got.Created.IsZero() || got.Created.Location() != time.UTC {
			t.Fatalf("created %+v", got)
		}
		ids = append(ids, got.ID)
		created = append(created, got.Created)
	}
	newestFirst := func(idx ...int) []uint64 {
		var out []uint64
		for _, i := range idx {
			out = append(out, ids[i])
		}
		return out
	}
	cases := []struct {
		name          string
		list          func(offset, limit int) ([]activity.Record, int, error)
		offset, limit int
		want          []uint64
		total         int
	}{
		{"org of the actor, all", func(o, n int) ([]activity.Record, int, error) { return l.Organization(ctx, 1, o, n) }, 0, 100, newestFirst(4, 3, 2, 1, 0), 5},
		{"org of the actor, second page", func(o, n int) ([]activity.Record, int, error) { return l.Organization(ctx, 1, o, n) }, 2, 2, newestFirst(2, 1), 5},
		{"org acted on", func(o, n int) ([]activity.Record, int, error) { return l.Organization(ctx, 2, o, n) }, 0, 100, newestFirst(4, 2, 0), 3},
		{"person acted on", func(o, n int) ([]activity.Record, int, error) { return l.Person(ctx, 20, o, n) }, 0, 100, newestFirst(4, 2, 0), 3},
		{"actor, indexed once when acting on self", func(o, n int) ([]activity.Record, int, error) { return l.Person(ctx, 10, o, n) }, 0, 100, newestFirst(4, 3, 2, 1, 0), 5},
		{"past the end", func(o, n int) ([]activity.Record, int, error) { return l.Person(ctx, 10, o, n) }, 9, 100, nil, 5},
		{"nobody", func(o, n int) ([]activity.Record, int, error) { return l.Person(ctx, 99, o, n) }, 0, 100, nil, 0},
		{"org, before a record", func(o, n int) ([]activity.Record, int, error) { return l.OrganizationBefore(ctx, 1, ids[3], o, n) }, 0, 2, newestFirst(2, 1), 3},
		{"person, before a record, second page", func(o, n int) ([]activity.Record, int, error) { return l.PersonBefore(ctx, 10, ids[3], o, n) }, 2, 2, newestFirst(0), 3},
		{"before the oldest", func(o, n int) ([]activity.Record, int, error) { return l.PersonBefore(ctx, 10, ids[0], o, n) }, 0, 100, nil, 0},
		{"before one past the newest", func(o, n int) ([]activity.Record, int, error) { return l.PersonBefore(ctx, 10, ids[4]+1, o, n) }, 0, 100, newestFirst(4, 3, 2, 1, 0), 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			recs, total, err := c.list(c.offset, c.limit)
			if err != nil {
				t.Fatal(err)
			}
			var got []uint64
			for _, r := range recs {
				got = append(got, r.ID)
			}
			if total != c.total || len(got) != len(c.want) {
				t.Fatalf("got %v of %d, want %v of %d", got, total, c.want, c.total)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("got %v, want %v", got, c.want)
				}
			}
		})
	}
	r, found, err := l.Get(ctx, ids[1])
	if err != nil || !found || r.ActedOnPersonID != 10 || r.DataText != "x" || r.ID != ids[1] || !r.Created.Equal(created[1]) {
		t.Fatalf("Get = %+v %v %v", r, found, err)
	}
	if _, found, err := l.Get(ctx, 12345); err != nil || found {
		t.Fatalf("Get(missing) = %v %v", found, err)
	}
}

func TestAppendRefusesUnknownType(t *testing.T) {
	l, _ := openLog(t, activity.Options{})
	if _, err := l.Create(context.Background(), activity.Record{ActivityTypeID: 9999}); err == nil {
		t.Fatal("unknown type accepted")
	}
}

// TestRetention: records and their index entries vanish together after
// the retention, without a sweeper.
func TestRetention(t *testing.T) {
	ctx := context.Background()
	l, _ := openLog(t, activity.Options{Retention: time.Second})
	keep, _ := openLog(t, activity.Options{})
	r := activity.Record{ActorType: "system", ActorCompanyID: 1, ActivityTypeID: note(t)}
	gone, err := l.Create(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := keep.Create(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2100 * time.Millisecond) // Badger expires with one-second resolution
	if _, found, _ := l.Get(ctx, gone.ID); found {
		t.Error("record outlived its retention")
	}
	if recs, total, _ := l.Organization(ctx, 1, 0, 10); len(recs) != 0 || total != 0 {
		t.Errorf("index outlived the retention: %d, total %d", len(recs), total)
	}
	if _, found, _ := keep.Get(ctx, kept.ID); !found {
		t.Error("retention 0 lost a record")
	}
}

func TestTypesTable(t *testing.T) {
	seenID, seenName := map[uint64]bool{}, map[string]bool{}
	for _, typ := range activity.Types() {
		if typ.ID == 0 || seenID[typ.ID] || seenName[typ.Name] || typ.Activity == "" {
			t.Errorf("bad or repeated type %+v", typ)
		}
		seenID[typ.ID], seenName[typ.Name] = true, true
		if got, ok := activity.TypeByID(typ.ID); !ok || got != typ {
			t.Errorf("TypeByID(%d) = %+v", typ.ID, got)
		}
	}
}

// TestRetentionLowered: records written under no retention, or a longer
// one, are removed by Prune once the retention now configured is past,
// with their index entries, in batches, the newer ones kept. The TTL
// alone kept them their old time, forever for those written under 0.
func TestRetentionLowered(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	clock := func() time.Time { return now }
	for _, tt := range []struct {
		name   string
		before time.Duration // the retention the old records were written under
	}{
		{"from forever", 0},
		{"from a year", 365 * 24 * time.Hour},
	} {
		t.Run(tt.name, func(t *testing.T) {
			db := openBench(t)
			old := activity.New(db, activity.Options{Retention: tt.before, Now: clock})
			const oldOnes = 300 // more than one batch
			for i := range oldOnes {
				r := activity.Record{ActorType: "person", ActorCompanyID: 1, ActorPersonID: 10, ActedOnPersonID: 20,
					ActivityTypeID: note(t), Created: now.Add(-48*time.Hour + time.Duration(i)*time.Second)}
				if _, err := old.Create(ctx, r); err != nil {
					t.Fatal(err)
				}
			}
			l := activity.New(db, activity.Options{Retention: 24 * time.Hour, Now: clock})
			fresh, err := l.Create(ctx, activity.Record{ActorType: "person", ActorCompanyID: 1, ActorPersonID: 10, ActivityTypeID: note(t)})
			if err != nil {
				t.Fatal(err)
			}
			n, err := l.Prune(ctx)
			if err != nil || n != oldOnes {
				t.Fatalf("pruned %d, %v; want %d", n, err, oldOnes)
			}
			for _, c := range []struct {
				name string
				list func() ([]activity.Record, int, error)
				want []uint64
			}{
				{"organization", func() ([]activity.Record, int, error) { return l.Organization(ctx, 1, 0, 100) }, []uint64{fresh.ID}},
				{"actor", func() ([]activity.Record, int, error) { return l.Person(ctx, 10, 0, 100) }, []uint64{fresh.ID}},
				{"acted on", func() ([]activity.Record, int, error) { return l.Person(ctx, 20, 0, 100) }, nil},
			} {
				recs, total, err := c.list()
				if err != nil {
					t.Fatal(err)
				}
				var got []uint64
				for _, r := range recs {
					got = append(got, r.ID)
				}
				if total != len(c.want) || !slices.Equal(got, c.want) {
					t.Errorf("%s after the prune: %v of %d, want %v", c.name, got, total, c.want)
				}
			}
			if n, err := l.Prune(ctx); err != nil || n != 0 {
				t.Errorf("second prune: %d, %v; want none", n, err)
			}
		})
	}
}

// TestPruneResumes: each of Prune's batches scans the records on from
// the one after the last the batch before removed. Each began at the
// first record, stepping over every one deleted before it, which the
// store keeps until it compacts: 160,000 records took 20 s, ten times
// 40,000's, where they now take 2.
func TestPruneResumes(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	clock := func() time.Time { return now }
	spy := &scanSpy{Store: openBench(t)}
	old := activity.New(spy, activity.Options{Now: clock})
	var ids []uint64
	for i := range 600 { // three batches
		r, err := old.Create(ctx, activity.Record{ActorType: "person", ActorCompanyID: 1, ActivityTypeID: note(t),
			Created: now.Add(-48*time.Hour + time.Duration(i)*time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	spy.starts = nil
	l := activity.New(spy, activity.Options{Retention: 24 * time.Hour, Now: clock})
	if n, err := l.Prune(ctx); err != nil || n != len(ids) {
		t.Fatalf("pruned %d, %v; want %d", n, err, len(ids))
	}
	if len(spy.starts) != 3 {
		t.Fatalf("%d scans of the records, want 3 (batches of 256)", len(spy.starts))
	}
	for k, start := range spy.starts[1:] {
		if lastRemoved := kv.Key(kv.ActivityRecord, ids[(k+1)*256-1]); bytes.Compare(start, lastRemoved) <= 0 {
			t.Errorf("batch %d scans from %x, at or before the last record removed before it (%x)", k+2, start, lastRemoved)
		}
	}
}

// scanSpy is a store that notes where its writers' scans of the
// activity records start.
type scanSpy struct {
	kv.Store
	starts [][]byte
}

func (s *scanSpy) Update(ctx context.Context, fn func(kv.Txn) error) error {
	return s.Store.Update(ctx, func(tx kv.Txn) error { return fn(spyTxn{tx, s}) })
}

type spyTxn struct {
	kv.Txn
	s *scanSpy
}

func (t spyTxn) Scan(prefix, start []byte, fn func(k, v []byte) error) error {
	if string(prefix) == kv.ActivityRecord {
		t.s.starts = append(t.s.starts, bytes.Clone(start))
	}
	return t.Txn.Scan(prefix, start, fn)
}
