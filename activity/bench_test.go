package activity_test

import (
	"context"
	"testing"
	"time"

	"berth/activity"
	"berth/kv"
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
