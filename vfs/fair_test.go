package vfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"berth/vfs"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fairWorld is two persons' roots under one organization's quota (a
// tally), each person the owner of the uploads staged into their root.
type fairWorld struct {
	e     *env
	roots map[string]vfs.Root
	opts  vfs.WriteOptions
	last  map[string]vfs.Staged // each owner's last upload
}

const fairQuota = 4 << 20

func newFairWorld(t *testing.T, shared bool) *fairWorld {
	return newFairWorldWith(t, shared, vfs.Options{})
}

func newFairWorldWith(t *testing.T, shared bool, o vfs.Options) *fairWorld {
	t.Helper()
	const tally = 90
	e := openEnvWith(t, t.TempDir(), o)
	t.Cleanup(e.close)
	w := &fairWorld{e: e, roots: map[string]vfs.Root{}, last: map[string]vfs.Staged{},
		opts: vfs.WriteOptions{Quotas: []vfs.Quota{{Tally: tally, Bytes: fairQuota, Shared: shared}}}}
	for _, who := range []string{"a", "b"} {
		r, err := e.fs.CreateRootWith(ctx, who, vfs.RootSync, vfs.RootOptions{Tallies: []uint64{tally}})
		if err != nil {
			t.Fatal(err)
		}
		w.roots[who] = r
	}
	e.root = w.roots["a"]
	return w
}

// fairStep is one operation of a person: stage an upload of n bytes,
// write a file of n bytes (declared or not), or send all of their last
// upload and finish it.
type fairStep struct {
	op, who string
	n       int64
	want    error
}

// TestStagedFairShare: under an organization's quota, one person's staged
// uploads reserve at most half of what stored bytes and the others'
// reservations leave; the rest of a length is checked when the upload
// is created and again when it ends. Before, the first step of the
// "another's ..." scripts reserved the whole quota and every other
// person's write was refused (an insider's denial of service).
func TestStagedFairShare(t *testing.T) {
	const q = fairQuota
	cases := []struct {
		name   string
		shared bool
		steps  []fairStep
	}{
		{"alone, the whole room", true, []fairStep{{"stage", "a", q, nil}, {"send", "a", 0, nil}}},
		{"another's upload within the share", true, []fairStep{{"stage", "a", q, nil}, {"stage", "b", q / 2, nil}, {"send", "b", 0, nil}}},
		{"another's declared write within the share", true, []fairStep{{"stage", "a", q, nil}, {"write", "b", q / 2, nil}}},
		{"another's write of unknown size within the share", true, []fairStep{{"stage", "a", q, nil}, {"write?", "b", q / 2, nil}}},
		{"another's upload past what is free", true, []fairStep{{"stage", "a", q, nil}, {"stage", "b", q/2 + 1, vfs.ErrQuotaExceeded}}},
		{"the end of an upload meets the room another took", true, []fairStep{
			{"stage", "a", q, nil}, {"write", "b", q / 2, nil}, {"send", "a", 0, vfs.ErrQuotaExceeded}}},
		{"the end of an upload with the room left", true, []fairStep{
			{"stage", "a", q / 2, nil}, {"write", "b", q / 4, nil}, {"send", "a", 0, nil}}},
		{"an owner's second upload reserves what the first leaves of their share", true, []fairStep{
			{"stage", "a", q / 2, nil}, {"stage", "a", q / 2, nil}, {"stage", "b", q / 2, nil}, {"stage", "a", q / 2, vfs.ErrQuotaExceeded}}},
		{"an owner's announced lengths stay within the room", true, []fairStep{
			{"stage", "a", q, nil}, {"stage", "a", q / 2, vfs.ErrQuotaExceeded}, {"stage", "a", 1, vfs.ErrQuotaExceeded}, {"stage", "b", q / 2, nil}}},
		{"what an ended upload announced is free again", true, []fairStep{
			{"stage", "a", q, nil}, {"send", "a", 0, nil}, {"drop", "a", 0, nil}, {"stage", "a", q, nil}}},
		{"a person's own quota is theirs", false, []fairStep{{"stage", "a", q, nil}, {"write", "b", 1, vfs.ErrQuotaExceeded}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newFairWorld(t, c.shared)
			for i, s := range c.steps {
				if err := w.do(s); !errors.Is(err, s.want) || (err != nil) != (s.want != nil) {
					t.Fatalf("step %d (%s by %s of %d): %v, want %v", i, s.op, s.who, s.n, err, s.want)
				}
			}
			if left, _, err := w.e.fs.QuotaLeft(ctx, w.roots["a"].ID, w.opts); err != nil || left < 0 {
				t.Errorf("the quota leaves %d (%v)", left, err)
			}
			w.e.fsckClean(t)
		})
	}
}

func (w *fairWorld) do(s fairStep) error {
	r := w.roots[s.who]
	switch s.op {
	case "stage":
		st, err := w.e.fs.Stage(ctx, r.ID, r.FolderID, fmt.Sprintf("u%d", time.Now().UnixNano()), vfs.StageOptions{Length: s.n, TTL: time.Hour, Owner: s.who}, w.opts)
		if err == nil {
			w.last[s.who] = st
		}
		return err
	case "write", "write?":
		opts := w.opts
		if s.op == "write" {
			opts.DeclaredSize = s.n
		}
		_, err := w.e.fs.WriteFile(ctx, r.ID, r.FolderID, fmt.Sprintf("w%d", time.Now().UnixNano()), bytes.NewReader(make([]byte, s.n)), opts)
		return err
	case "drop": // every file of the owner's root, to the trash and out of it
		if err := w.e.fs.DeleteRoot(ctx, r.ID); err != nil {
			return err
		}
		// A deleted root's bytes count until its purge.
		if _, err := w.e.fs.PurgeDeleted(ctx, time.Now().Add(time.Hour)); err != nil {
			return err
		}
		nr, err := w.e.fs.CreateRootWith(ctx, s.who+"2", vfs.RootSync, vfs.RootOptions{Tallies: []uint64{90}})
		w.roots[s.who] = nr
		return err
	case "send":
		st := w.last[s.who]
		if _, err := w.e.fs.Append(ctx, st.ID, 0, bytes.NewReader(make([]byte, st.Length)), vfs.AppendOptions{}); err != nil {
			return err
		}
		_, err := w.e.fs.Finish(ctx, st.ID, w.opts)
		return err
	}
	return fmt.Errorf("unknown step %q", s.op)
}

// TestStagedFairConcurrent: creations of one person in parallel never
// reserve more than the quota holds, nor more than their fair share of
// it, so another person's upload of a quarter of it is created after
// them, and together they announce no more than the quota. Before, the
// first four took the whole quota; before the announced counts, all
// eight were created.
func TestStagedFairConcurrent(t *testing.T) {
	const q = fairQuota
	w := newFairWorld(t, true)
	a := w.roots["a"]
	var wg sync.WaitGroup
	var mu sync.Mutex
	var made int64
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := w.e.fs.Stage(ctx, a.ID, a.FolderID, fmt.Sprintf("p%d", i), vfs.StageOptions{Length: q / 4, TTL: time.Hour, Owner: "a"}, w.opts)
			if err != nil && !errors.Is(err, vfs.ErrQuotaExceeded) {
				t.Errorf("stage %d: %v", i, err)
			}
			if err == nil {
				mu.Lock()
				made += q / 4
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	left, _, err := w.e.fs.QuotaLeft(ctx, a.ID, w.opts)
	if err != nil {
		t.Fatal(err)
	}
	if reserved := q - left; reserved > q/2 || reserved < 0 {
		t.Errorf("%d bytes of uploads created (%d reserved), want at most %d reserved", made, reserved, q/2)
	}
	if made > q {
		t.Errorf("%d bytes of uploads created, want at most the quota's %d: their bytes are stored as they come", made, q)
	}
	b := w.roots["b"]
	if _, err := w.e.fs.Stage(ctx, b.ID, b.FolderID, "b", vfs.StageOptions{Length: q / 4, TTL: time.Hour, Owner: "b"}, w.opts); err != nil {
		t.Fatalf("another person's upload of a quarter of the quota: %v", err)
	}
	w.e.fsckClean(t)
}

// TestStagedGauges: the gauges of the uploads in progress and of what
// they reserve follow creations, termination and expiry; what is announced
// past a person's fair share is not reserved. Before, no figure showed a
// reservation.
func TestStagedGauges(t *testing.T) {
	const q = fairQuota
	reg := prometheus.NewRegistry()
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	w := newFairWorldWith(t, true, vfs.Options{Registerer: reg, Now: clock})
	want := func(step string, uploads, reserved float64) {
		t.Helper()
		const exp = `# HELP berth_vfs_staged_reserved_bytes Bytes the declared lengths of the staged uploads in progress reserve against the quotas.
# TYPE berth_vfs_staged_reserved_bytes gauge
berth_vfs_staged_reserved_bytes %g
# HELP berth_vfs_staged_uploads Staged (tus) uploads in progress, expired ones not yet swept included.
# TYPE berth_vfs_staged_uploads gauge
berth_vfs_staged_uploads %g
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(fmt.Sprintf(exp, reserved, uploads)),
			"berth_vfs_staged_uploads", "berth_vfs_staged_reserved_bytes"); err != nil {
			t.Errorf("%s: %v", step, err)
		}
	}
	want("none", 0, 0)
	if err := w.do(fairStep{"stage", "a", q, nil}); err != nil {
		t.Fatal(err)
	}
	a := w.last["a"]
	want("a person alone announces the whole quota", 1, q/2)
	if err := w.do(fairStep{"stage", "b", q / 2, nil}); err != nil {
		t.Fatal(err)
	}
	want("another announces half of it", 2, q/2+q/4)
	if err := w.e.fs.Terminate(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	want("the first is ended", 1, q/4)
	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	want("the second expired, not swept", 1, q/4)
	if n, err := w.e.fs.ExpireStaged(ctx); n != 1 || err != nil {
		t.Fatalf("ExpireStaged: %d, %v", n, err)
	}
	want("swept", 0, 0)
	if left, _, err := w.e.fs.QuotaLeft(ctx, w.roots["a"].ID, w.opts); err != nil || left != q {
		t.Errorf("the quota leaves %d after the sweep (%v), want %d", left, err, q)
	}
	w.e.fsckClean(t)
}

// TestFsckReservations: Fsck compares the counts of what each owner's
// staged uploads reserve into a root, and announce past that, with the
// uploads' sums, and reports each that differs. Before, it checked the
// chunk counts alone, and a damaged count shrank or grew an owner's
// share of the quota unseen.
func TestFsckReservations(t *testing.T) {
	const q = fairQuota
	type set struct {
		owner     string
		announced bool
		n         int64 // -1: delete
	}
	cases := []struct {
		name   string
		damage []set
		want   []vfs.BadReservation // in owner, root, reserved-then-announced order
	}{
		{"sound", nil, nil},
		{"a reservation counted too high", []set{{"a", false, q/2 + 1}},
			[]vfs.BadReservation{{Owner: "a", Stored: q/2 + 1, Want: q / 2}}},
		{"an announced count lost", []set{{"a", true, -1}},
			[]vfs.BadReservation{{Owner: "a", Announced: true, Want: q / 2}}},
		{"a count at 0, which is never stored", []set{{"a", false, 0}},
			[]vfs.BadReservation{{Owner: "a", Want: q / 2}}},
		{"a count of an owner with no upload", []set{{"ghost", false, 7}, {"ghost", true, 3}},
			[]vfs.BadReservation{{Owner: "ghost", Stored: 7}, {Owner: "ghost", Announced: true, Stored: 3}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newFairWorld(t, true)
			if err := w.do(fairStep{"stage", "a", q, nil}); err != nil {
				t.Fatal(err)
			}
			root := w.roots["a"].ID
			for _, d := range c.damage {
				if err := w.e.fs.SetOwnedCount(ctx, d.owner, root, d.announced, d.n); err != nil {
					t.Fatal(err)
				}
			}
			rep, err := w.e.fs.Fsck(ctx, false)
			if err != nil {
				t.Fatal(err)
			}
			for i := range c.want {
				c.want[i].Root = root
			}
			if fmt.Sprint(rep.BadReservations) != fmt.Sprint(c.want) || rep.OK() != (len(c.want) == 0) {
				t.Fatalf("fsck: %v (OK %v), bad reservations %v; want %v", rep, rep.OK(), rep.BadReservations, c.want)
			}
			if len(c.want) > 0 && !strings.Contains(rep.String(), fmt.Sprintf("%d bad reservation counts", len(c.want))) {
				t.Errorf("the summary %q does not count them", rep)
			}
		})
	}
}

// TestFsckUploadCounts: fsck names each owner whose count of staged
// uploads in progress (what tus.max_uploads is checked against) differs
// from the uploads it counts.
func TestFsckUploadCounts(t *testing.T) {
	const q = fairQuota
	cases := []struct {
		name   string
		damage map[string]int64 // owner: count stored, -1 deleted
		want   []vfs.BadUploadCount
	}{
		{"sound", nil, nil},
		{"a count too high", map[string]int64{"a": 3}, []vfs.BadUploadCount{{Owner: "a", Stored: 3, Want: 1}}},
		{"a count lost", map[string]int64{"a": -1}, []vfs.BadUploadCount{{Owner: "a", Want: 1}}},
		{"a count at 0, which is never stored", map[string]int64{"a": 0}, []vfs.BadUploadCount{{Owner: "a", Want: 1}}},
		{"a count of an owner with no upload", map[string]int64{"ghost": 2}, []vfs.BadUploadCount{{Owner: "ghost", Stored: 2}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newFairWorld(t, true)
			if err := w.do(fairStep{"stage", "a", q / 4, nil}); err != nil {
				t.Fatal(err)
			}
			for owner, n := range c.damage {
				if err := w.e.fs.SetUploadCount(ctx, owner, n); err != nil {
					t.Fatal(err)
				}
			}
			rep, err := w.e.fs.Fsck(ctx, false)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(rep.BadUploadCounts) != fmt.Sprint(c.want) || rep.OK() != (len(c.want) == 0) {
				t.Fatalf("fsck: %v (OK %v), bad upload counts %v; want %v", rep, rep.OK(), rep.BadUploadCounts, c.want)
			}
			if len(c.want) > 0 && !strings.Contains(rep.String(), fmt.Sprintf("%d bad upload counts", len(c.want))) {
				t.Errorf("the summary %q does not count them", rep)
			}
		})
	}
}
