package vfs_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
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
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no berth_vfs_operations_total{op=%q,result=%q}", op, result)
	return 0
}
