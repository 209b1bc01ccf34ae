package daemon

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"berth/kv/badger"
)

// TestClusterJobsOncePerCluster: two nodes on one metadata store never
// run the same background job at once; the second passes the round over
// while the first holds the job's lease, runs it once the first is done,
// and another job is not held up by it.
func TestClusterJobsOncePerCluster(t *testing.T) {
	db, err := badger.Open(badger.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	log := slog.New(slog.DiscardHandler)
	a, b := newClusterJobs(db, log), newClusterJobs(db, log)
	if a.holder == b.holder {
		t.Fatalf("two processes' jobs share the holder %q", a.holder)
	}
	ctx := context.Background()
	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.once(ctx, "gc", func(context.Context) {
			close(started)
			<-release
		})
	}()
	<-started

	var ran atomic.Int32
	steps := []struct {
		name string
		jobs *clusterJobs
		job  string
		want int32 // runs counted after the step
	}{
		{"b, while a runs gc", b, "gc", 0},
		{"b, another job", b, "trim", 1},
		{"no cluster (tests)", nil, "gc", 2},
	}
	for _, st := range steps {
		st.jobs.once(ctx, st.job, func(context.Context) { ran.Add(1) })
		if got := ran.Load(); got != st.want {
			t.Fatalf("%s: %d runs, want %d", st.name, got, st.want)
		}
	}
	close(release)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a's job did not end")
	}
	b.once(ctx, "gc", func(context.Context) { ran.Add(1) })
	if ran.Load() != 3 {
		t.Fatal("b did not run gc once a had released it")
	}
}
