package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"testing"
	"time"

	"berth/agent/agenttest"
)

// BenchmarkIncrementalBackup is issue 17's benchmark: a run of a backup
// that finds 10 changed files among 100,000 unchanged ones, against the
// real server, reporting the bytes it wrote to the wire as a share of the
// tree's bytes and its wall time.
//
// The 10 files are backed up for real first. The 99,990 others are then
// written and entered in the index as the run that sent them would have
// left it (their sizes, times and inodes; ids that are never asked): a
// run reads no unchanged file and asks the server nothing about it, so
// the timed run is the one after their upload, without the hours the
// upload of 100,000 files takes on a loaded test machine.
//
//	go test -run '^$' -bench IncrementalBackup -benchtime=1x ./agent/
func BenchmarkIncrementalBackup(b *testing.B) {
	const unchanged, changedN, changedSize = 99_990, 10, 32 << 10
	srv := agenttest.StartServer(b)
	alice := srv.CreatePerson(b, "alice", false)
	dir := b.TempDir()
	src := filepath.Join(dir, "tree")
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, changedSize)
	writeChanged := func() {
		for i := range changedN {
			for k := range buf {
				buf[k] = byte(rng.Uint32())
			}
			if err := os.WriteFile(filepath.Join(src, "changed", fmt.Sprintf("c%02d.bin", i)), buf, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := os.MkdirAll(filepath.Join(src, "changed"), 0o755); err != nil {
		b.Fatal(err)
	}
	writeChanged()

	a, j, report := startBackupAgent(b, srv, alice, dir, src)
	ctx := context.Background()

	// The unchanged files, in folders of 100, and their index entries.
	j.runMu.Lock()
	ix := j.ix
	var treeBytes int64 = changedN * changedSize
	small := make([]byte, 2048)
	for k := range small {
		small[k] = byte(rng.Uint32())
	}
	for i := range unchanged {
		rel := fmt.Sprintf("/u%03d/f%05d.txt", i/100, i)
		if i%100 == 0 {
			d := filepath.Join(src, filepath.FromSlash(path.Dir(rel)))
			if err := os.Mkdir(d, 0o755); err != nil {
				b.Fatal(err)
			}
			ix.entries[path.Dir(rel)] = &indexEntry{Path: path.Dir(rel), Dir: true, ID: uint64(1e9 + i)}
		}
		p := filepath.Join(src, rel)
		n := 1 + rng.IntN(len(small))
		if err := os.WriteFile(p, small[:n], 0o644); err != nil {
			b.Fatal(err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			b.Fatal(err)
		}
		treeBytes += fi.Size()
		ix.entries[rel] = &indexEntry{Path: rel, ID: uint64(2e9 + i), Rev: uint64(2e9 + i), Size: fi.Size(),
			MtimeNs: fi.ModTime().UnixNano(), Ino: inodeOf(fi), Chunks: []chunkInfo{{Len: fi.Size(), Sum: make([]byte, 16)}}}
	}
	ix.mu.Lock()
	err := ix.compact()
	ix.mu.Unlock()
	j.runMu.Unlock()
	if err != nil {
		b.Fatal(err)
	}
	// What a restarted agent pays once before its first run: reading
	// the index.
	t0 := time.Now()
	if ix2, err := openIndex(ix.dir); err != nil || len(ix2.entries) != len(ix.entries) {
		b.Fatalf("reading the index again: %v", err)
	} else {
		ix2.close()
	}
	load := time.Since(t0)

	var wall time.Duration
	var wire, literal, sent int64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		writeChanged()
		b.StartTimer()
		w0 := a.WireBytes()
		t0 := time.Now()
		if err := a.backups.run(ctx, j); err != nil {
			b.Fatal(err)
		}
		wall += time.Since(t0)
		wire += a.WireBytes() - w0
		var rep RunReport
		rb, _ := os.ReadFile(report)
		if err := json.Unmarshal(rb, &rep); err != nil || rep.Sent != changedN || rep.Scanned != unchanged+changedN {
			b.Fatalf("the run: %s", rb)
		}
		literal += rep.Literal
		sent += rep.Sent
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(100*float64(wire)/n/float64(treeBytes), "%tree-sent")
	b.ReportMetric(float64(wire)/n, "wire-B/run")
	b.ReportMetric(float64(treeBytes), "tree-B")
	b.ReportMetric(wall.Seconds()/n, "s/run")
	b.ReportMetric(float64(load.Milliseconds()), "index-load-ms")
	b.ReportMetric(float64(literal)/n, "literal-B/run")
}
