package activity_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"berth/activity"
	"berth/kv"
	"berth/kv/badger"
)

// BenchmarkAppend is what a record adds to the transaction of a change:
// an id, the encoding and three keys with a TTL (the commit, shared with
// the change, is left out by appending 100 records a transaction).
func BenchmarkAppend(b *testing.B) {
	ctx := context.Background()
	db := openBench(b)
	l := activity.New(db, activity.Options{Retention: 365 * 24 * time.Hour})
	typ, _ := activity.TypeNamed("write")
	r := activity.Record{ActorType: "person", ActorText: "Alice (alice)", ActorCompanyID: 1, ActorPersonID: 2,
		ActedOnType: "file", ActedOnText: "report.pdf", ActedOnCompanyID: 1, ActedOnPersonID: 2, ActedOnRootID: 3,
		ActionText: "new revision", DataText: "123456 bytes", ActivityTypeID: typ.ID, Processed: true}
	b.ReportAllocs()
	for b.Loop() {
		if err := db.Update(ctx, func(tx kv.Txn) error {
			for range 100 {
				if _, err := l.Append(ctx, tx, r); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100), "ns/record")
}

// BenchmarkPage reads the first page of an organization of 10,000
// records.
func BenchmarkPage(b *testing.B) {
	ctx := context.Background()
	db := openBench(b)
	l := activity.New(db, activity.Options{})
	typ, _ := activity.TypeNamed("write")
	for range 100 {
		if err := db.Update(ctx, func(tx kv.Txn) error {
			for range 100 {
				if _, err := l.Append(ctx, tx, activity.Record{ActorCompanyID: 1, ActivityTypeID: typ.ID}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if recs, total, err := l.Organization(ctx, 1, 0, 100); err != nil || len(recs) != 100 || total != 10000 {
			b.Fatal(len(recs), total, err)
		}
	}
}

// BenchmarkPageHistory reads one page of 50 with its total from an
// organization of 200,000 records (a year of a large organization is
// millions): the first page, a deep one by offset and one by before_id.
// It reports the store's reads of a page (TxnStats: Gets, Scans, and
// keys/op, the keys its scans visit) beside its time and allocations, to
// show what a page costs against the history it sits in.
func BenchmarkPageHistory(b *testing.B) {
	const records = 200_000
	ctx := context.Background()
	db := openBench(b)
	keys := &keyCounter{Store: db}
	l := activity.New(keys, activity.Options{Retention: 365 * 24 * time.Hour})
	typ, _ := activity.TypeNamed("write")
	var mid uint64
	for i := 0; i < records; i += 1000 {
		if err := db.Update(ctx, func(tx kv.Txn) error {
			for j := range 1000 {
				r, err := l.Append(ctx, tx, activity.Record{ActorCompanyID: 1, ActorPersonID: uint64(2 + (i+j)%50_000), ActivityTypeID: typ.ID})
				if err != nil {
					return err
				}
				if i+j == records/2 {
					mid = r.ID
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	stats := db.(interface{ TxnStats() badger.TxnStats })
	for _, tc := range []struct {
		name          string
		before        uint64
		offset, total int
	}{
		{"first", 0, 0, records},
		{"offset", 0, 100_000, records},
		{"before_id", mid, 0, records / 2},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			s0, k0 := stats.TxnStats(), keys.n.Load()
			for b.Loop() {
				recs, total, err := l.OrganizationBefore(ctx, 1, tc.before, tc.offset, 50)
				if err != nil || len(recs) != 50 || total != tc.total {
					b.Fatal(len(recs), total, err)
				}
			}
			s1, k1 := stats.TxnStats(), keys.n.Load()
			b.ReportMetric(float64(k1-k0)/float64(b.N), "keys/op")
			b.ReportMetric(float64(s1.Gets-s0.Gets)/float64(b.N), "gets/op")
			b.ReportMetric(float64(s1.Scans-s0.Scans)/float64(b.N), "scans/op")
		})
	}
}

// keyCounter is the real store, counting the keys its scans visit: the
// store's TxnStats count scans, not how far each one went.
type keyCounter struct {
	kv.Store
	n atomic.Int64
}

func (c *keyCounter) View(ctx context.Context, fn func(kv.Txn) error) error {
	return c.Store.View(ctx, func(tx kv.Txn) error { return fn(countingTxn{tx, &c.n}) })
}

func (c *keyCounter) Update(ctx context.Context, fn func(kv.Txn) error) error {
	return c.Store.Update(ctx, func(tx kv.Txn) error { return fn(countingTxn{tx, &c.n}) })
}

type countingTxn struct {
	kv.Txn
	n *atomic.Int64
}

func (t countingTxn) Scan(prefix, start []byte, fn func(k, v []byte) error) error {
	return t.Txn.Scan(prefix, start, func(k, v []byte) error { t.n.Add(1); return fn(k, v) })
}

func (t countingTxn) ScanReverse(prefix, start []byte, fn func(k, v []byte) error) error {
	return t.Txn.ScanReverse(prefix, start, func(k, v []byte) error { t.n.Add(1); return fn(k, v) })
}
