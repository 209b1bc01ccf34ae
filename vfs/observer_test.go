package vfs_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"berth/vfs"
	"berth/vfs/chunk"
)

type recorder struct {
	mu  sync.Mutex
	ops []vfs.Op
}

func (r *recorder) Observe(ev vfs.Event) {
	r.mu.Lock()
	r.ops = append(r.ops, ev.Op)
	r.mu.Unlock()
}

// The observer hears every committed change and nothing that failed; the
// metrics count both by kind and result.
func TestObserverAndMetrics(t *testing.T) {
	dir := t.TempDir()
	db := openBadger(t, filepath.Join(dir, "meta"), false)
	defer db.Close()
	chunks, _ := chunk.NewDisk(filepath.Join(dir, "chunks"))
	rec := &recorder{}
	reg := prometheus.NewRegistry()
	fs, err := vfs.Open(context.Background(), db, chunks, vfs.Options{Observer: rec, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	root, _ := fs.CreateRoot(ctx, "r", vfs.RootSync)
	d, _ := fs.Mkdir(ctx, root.ID, root.FolderID, "d", vfs.WriteOptions{})
	f, _ := fs.WriteFile(ctx, root.ID, d.ID, "f", strings.NewReader("x"), vfs.WriteOptions{})
	fs.Rename(ctx, root.ID, f.ID, "g", vfs.WriteOptions{})
	fs.Mkdir(ctx, root.ID, root.FolderID, "d", vfs.WriteOptions{}) // name conflict: not observed
	fs.Delete(ctx, root.ID, d.ID, vfs.WriteOptions{})
	want := []vfs.Op{vfs.OpCreateRoot, vfs.OpMkdir, vfs.OpWrite, vfs.OpRename, vfs.OpDelete}
	if strings.Join(opNames(rec.ops), ",") != strings.Join(opNames(want), ",") {
		t.Fatalf("observed %v, want %v", rec.ops, want)
	}
	if n := counter(t, reg, "mkdir", "name_conflict"); n != 1 {
		t.Fatalf("mkdir name_conflict counted %v times", n)
	}
}

func opNames(ops []vfs.Op) []string {
	var s []string
	for _, o := range ops {
		s = append(s, string(o))
	}
	return s
}

func counter(t *testing.T, reg *prometheus.Registry, op, result string) float64 {
	t.Helper()
	v, ok := lookupCounter(t, reg, op, result)
	if !ok {
		t.Fatalf("no berth_vfs_operations_total{op=%q,result=%q}", op, result)
	}
	return v
}

// TestMetricsRefusals: a request refused by the caller's own check
// (WriteAt's, MkdirAt's, DeleteAt's, MoveAt's) counts as "refused", one
// vfs refuses by its own errors as their class (a path WriteAt, MkdirAt,
// DeleteAt or MoveAt cannot take among them), neither as "error", which
// is a failure of the store.
func TestMetricsRefusals(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnvWith(t, vfs.Options{Registerer: reg})
	fs, root := e.fs, e.root
	if _, err := fs.WriteFile(ctx, root.ID, root.FolderID, "f", strings.NewReader("x"), vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	no := errors.New("the caller's check refuses")
	refuse := func(error, *vfs.Node) error { return no }
	small := func() vfs.WriteOptions { return vfs.WriteOptions{DeclaredSize: 1} }
	for _, c := range []struct {
		name       string
		do         func() error
		op, result string
	}{
		{"WriteAt, small body, the check refuses", func() error {
			_, _, err := fs.WriteAt(ctx, root.ID, "/missing/g", strings.NewReader("y"), small(), refuse)
			return err
		}, "write", "refused"},
		{"WriteAt, large body, the check refuses", func() error {
			_, _, err := fs.WriteAt(ctx, root.ID, "/g", strings.NewReader(strings.Repeat("y", vfs.InlineMax+1)), vfs.WriteOptions{DeclaredSize: vfs.InlineMax + 1}, refuse)
			return err
		}, "write", "refused"},
		{"WriteAt, no folder", func() error {
			_, _, err := fs.WriteAt(ctx, root.ID, "/missing/g", strings.NewReader("y"), small(), nil)
			return err
		}, "write", "not_found"},
		{"WriteAt, an invalid path", func() error {
			_, _, err := fs.WriteAt(ctx, root.ID, "/a/../g", strings.NewReader("y"), small(), nil)
			return err
		}, "write", "invalid_name"},
		{"WriteAt, the top folder", func() error {
			_, _, err := fs.WriteAt(ctx, root.ID, "/", strings.NewReader("y"), small(), nil)
			return err
		}, "write", "invalid_name"},
		{"WriteFile, changed", func() error {
			_, err := fs.WriteFile(ctx, root.ID, root.FolderID, "f", strings.NewReader("y"), vfs.WriteOptions{IfAbsent: true})
			return err
		}, "write", "changed"},
		{"MkdirAt, the check refuses", func() error {
			_, err := fs.MkdirAt(ctx, root.ID, "/d", vfs.WriteOptions{}, refuse)
			return err
		}, "mkdir", "refused"},
		{"Mkdir, an invalid name", func() error {
			_, err := fs.Mkdir(ctx, root.ID, root.FolderID, "a/b", vfs.WriteOptions{})
			return err
		}, "mkdir", "invalid_name"},
		{"MkdirAt, an invalid path", func() error {
			_, err := fs.MkdirAt(ctx, root.ID, "/a/../d", vfs.WriteOptions{}, nil)
			return err
		}, "mkdir", "invalid_name"},
		{"MkdirAt, the top folder", func() error {
			_, err := fs.MkdirAt(ctx, root.ID, "/", vfs.WriteOptions{}, nil)
			return err
		}, "mkdir", "invalid_name"},
		{"DeleteAt, the check refuses", func() error {
			return fs.DeleteAt(ctx, root.ID, "/f", vfs.WriteOptions{}, func(vfs.Node) error { return no })
		}, "delete", "refused"},
		{"MoveAt, the check refuses", func() error {
			_, _, err := fs.MoveAt(ctx, root.ID, "/f", "/g", vfs.WriteOptions{}, func(vfs.Node, error, *vfs.Node) error { return no })
			return err
		}, "move", "refused"},
		{"MoveAt, no folder", func() error {
			_, _, err := fs.MoveAt(ctx, root.ID, "/f", "/missing/g", vfs.WriteOptions{}, nil)
			return err
		}, "move", "not_found"},
		{"DeleteAt, an invalid path", func() error {
			return fs.DeleteAt(ctx, root.ID, "/a/../f", vfs.WriteOptions{}, nil)
		}, "delete", "invalid_name"},
		{"DeleteAt, the top folder", func() error {
			return fs.DeleteAt(ctx, root.ID, "/", vfs.WriteOptions{}, nil)
		}, "delete", "root_item"},
		{"MoveAt, an invalid path", func() error {
			_, _, err := fs.MoveAt(ctx, root.ID, "/a/../f", "/g", vfs.WriteOptions{}, nil)
			return err
		}, "move", "invalid_name"},
		{"MoveAt, the top folder", func() error {
			_, _, err := fs.MoveAt(ctx, root.ID, "/", "/g", vfs.WriteOptions{}, nil)
			return err
		}, "move", "root_item"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before, errors0 := counterOr0(t, reg, c.op, c.result), counterOr0(t, reg, c.op, "error")
			if err := c.do(); err == nil {
				t.Fatal("not refused")
			}
			if n := counterOr0(t, reg, c.op, c.result) - before; n != 1 {
				t.Errorf("%s %s counted %v times, want 1", c.op, c.result, n)
			}
			if n := counterOr0(t, reg, c.op, "error") - errors0; n != 0 {
				t.Errorf("%s error counted %v times, want 0", c.op, n)
			}
		})
	}
}

// TestMetricsMoveAtStoreFailure: a store that fails a MoveAt's walk down
// to its destination's folder counts as "error", as it does on the walk
// to the source, also where the check hands that failure back as it got
// it (webdav's does, to answer it in copyMove's order): it is no refusal
// of the caller's.
func TestMetricsMoveAtStoreFailure(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnvWith(t, vfs.Options{Registerer: reg})
	fs, root := e.fs, e.root
	if _, err := fs.WriteFile(ctx, root.ID, root.FolderID, "f", strings.NewReader("x"), vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Mkdir(ctx, root.ID, root.FolderID, "bad", vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := fs.CorruptRecord(ctx, root.FolderID, "bad"); err != nil {
		t.Fatal(err)
	}
	passOn := func(_ vfs.Node, dstErr error, _ *vfs.Node) error { return dstErr }
	for _, c := range []struct{ name, src, dst string }{
		{"the source's folder", "/bad/f", "/g"},
		{"the destination's folder", "/f", "/bad/g"},
	} {
		t.Run(c.name, func(t *testing.T) {
			errors0, refused0 := counterOr0(t, reg, "move", "error"), counterOr0(t, reg, "move", "refused")
			if _, _, err := fs.MoveAt(ctx, root.ID, c.src, c.dst, vfs.WriteOptions{}, passOn); err == nil || errors.Is(err, vfs.ErrNotExist) {
				t.Fatalf("MoveAt through a record that does not decode: %v", err)
			}
			if n := counterOr0(t, reg, "move", "error") - errors0; n != 1 {
				t.Errorf("move error counted %v times, want 1", n)
			}
			if n := counterOr0(t, reg, "move", "refused") - refused0; n != 0 {
				t.Errorf("move refused counted %v times, want 0", n)
			}
		})
	}
}

// TestMetricsReadBuffers: the gauges of the downloads' chunk buffers
// show what an open download holds, within the read-ahead budget, and
// nothing once it is closed.
func TestMetricsReadBuffers(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnvWith(t, vfs.Options{Registerer: reg, ReadAheadBudget: 8 << 20})
	n := e.write(t, e.root.FolderID, "f", randBytes(5, 6<<20))
	gauge := func(name string) float64 { t.Helper(); return gaugeValue(t, reg, name) }
	if b := gauge("berth_vfs_read_ahead_budget_bytes"); b != 8<<20 {
		t.Errorf("budget %v, want %v", b, 8<<20)
	}
	f, err := e.fs.Open(ctx, e.root.ID, n.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Read(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	held, ahead := gauge("berth_vfs_read_buffers_bytes"), gauge("berth_vfs_read_ahead_bytes")
	if held < 1<<18 || ahead > 8<<20 {
		t.Errorf("an open download: %v bytes held, %v of the budget ahead; want at least its chunk's 256 KiB, at most the budget ahead", held, ahead)
	}
	f.Close()
	if held, ahead := gauge("berth_vfs_read_buffers_bytes"), gauge("berth_vfs_read_ahead_bytes"); held != 0 || ahead != 0 {
		t.Errorf("closed: %v bytes held, %v ahead; want none", held, ahead)
	}
}

// gaugeValue is the value of the gauge name in reg.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

// TestMetricsZipLayouts: the gauges of the zip layout budget show what
// the zips being served hold of it, a layout that requests share once,
// and how many requesters hold some, and nothing once they are closed;
// Options.ZipHeld is told the same bytes.
func TestMetricsZipLayouts(t *testing.T) {
	reg := prometheus.NewRegistry()
	var told atomic.Int64
	e := newEnvWith(t, vfs.Options{Registerer: reg, ZipBudget: 1 << 20, ZipHeld: func(n int64) { told.Store(n) }})
	e.write(t, e.root.FolderID, "f", []byte("x"))
	e.write(t, e.root.FolderID, "g", []byte("y"))
	if b := gaugeValue(t, reg, "berth_vfs_zip_layout_budget_bytes"); b != 1<<20 {
		t.Errorf("budget %v, want %v", b, 1<<20)
	}
	var zips []*vfs.Zip
	for _, who := range []string{"link:1", "link:1", "person:2"} {
		z, err := e.fs.Zip(ctx, e.root.ID, e.root.FolderID, vfs.ZipOptions{Requester: who})
		if err != nil {
			t.Fatal(err)
		}
		zips = append(zips, z)
	}
	want := 2 * float64(vfs.ZipEntryCost+1) // one layout, shared
	if b, n := gaugeValue(t, reg, "berth_vfs_zip_layout_bytes"), gaugeValue(t, reg, "berth_vfs_zip_requesters"); b != want || n != 2 || told.Load() != int64(want) {
		t.Errorf("three zips of one layout of two entries, two requesters: %v bytes, %v requesters, %d told; want %v, 2", b, n, told.Load(), want)
	}
	for _, z := range zips {
		z.Close()
	}
	if b, n := gaugeValue(t, reg, "berth_vfs_zip_layout_bytes"), gaugeValue(t, reg, "berth_vfs_zip_requesters"); b != 0 || n != 0 || told.Load() != 0 {
		t.Errorf("closed: %v bytes, %v requesters, %d told; want none", b, n, told.Load())
	}
}

// counterOr0 is counter, 0 for a series not yet made.
func counterOr0(t *testing.T, reg *prometheus.Registry, op, result string) float64 {
	t.Helper()
	v, _ := lookupCounter(t, reg, op, result)
	return v
}

// lookupCounter finds berth_vfs_operations_total{op, result}; ok is
// false where that series was never made.
func lookupCounter(t *testing.T, reg *prometheus.Registry, op, result string) (v float64, ok bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "berth_vfs_operations_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["op"] == op && labels["result"] == result {
				return m.GetCounter().GetValue(), true
			}
		}
	}
	return 0, false
}

// stallingBody sends rest bytes, says so once, then waits for ctx, as a
// client that stops sending does.
type stallingBody struct {
	ctx     context.Context
	rest    int
	stalled func()
	once    sync.Once
}

func (b *stallingBody) Read(p []byte) (int, error) {
	if b.rest > 0 {
		n := min(len(p), b.rest, 32<<10)
		b.rest -= n
		return n, nil
	}
	b.once.Do(b.stalled)
	<-b.ctx.Done()
	return 0, context.Cause(b.ctx)
}

// TestMetricsUploadSegmentBytes: uploads whose clients stall hold, and
// berth_upload_segment_bytes reports, the buffer that what they sent
// needs (a stream's first segment starts in 256 KiB), not a whole
// segment (8 MiB) each; and nothing once they have ended.
func TestMetricsUploadSegmentBytes(t *testing.T) {
	const uploads, sent = 4, vfs.InlineMax + 1000 // past what revisions keep inline
	const firstBuffer = 256 << 10
	reg := prometheus.NewRegistry()
	e := newEnvWith(t, vfs.Options{Registerer: reg})
	held := func() float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "berth_upload_segment_bytes" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no berth_upload_segment_bytes")
		return 0
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stalled, done sync.WaitGroup
	stalled.Add(uploads)
	for i := range uploads {
		done.Go(func() {
			body := &stallingBody{ctx: ctx, rest: sent, stalled: stalled.Done}
			if _, err := e.fs.WriteFile(ctx, e.root.ID, e.root.FolderID, "f"+string(rune('a'+i)), body, vfs.WriteOptions{}); !errors.Is(err, context.Canceled) {
				t.Errorf("stalled upload: %v, want context.Canceled", err)
			}
		})
	}
	stalled.Wait()
	if got, want := held(), float64(uploads*firstBuffer); got != want {
		t.Errorf("%d uploads stalled after %d bytes: berth_upload_segment_bytes %v, want %v", uploads, sent, got, want)
	}
	cancel()
	done.Wait()
	if got := held(); got != 0 {
		t.Errorf("after the uploads ended: berth_upload_segment_bytes %v, want 0", got)
	}
}
