package vfs_test

import (
	"bytes"
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"berth/berthtest"
	"berth/kv"
	"berth/vfs"
	"berth/vfs/chunk"
)

// stage starts a staged upload of length bytes as name in e's top folder.
func (e *env) stage(t *testing.T, name string, length int64, opts vfs.WriteOptions) vfs.Staged {
	t.Helper()
	st, err := e.fs.Stage(ctx, e.root.ID, e.root.FolderID, name, vfs.StageOptions{Length: length, TTL: time.Hour}, opts)
	if err != nil {
		t.Fatalf("stage %s: %v", name, err)
	}
	return st
}

// appendAll appends data[from:to] to upload id, failing the test on error.
func (e *env) appendAll(t *testing.T, id uint64, data []byte, from, to int) vfs.Staged {
	t.Helper()
	st, err := e.fs.Append(ctx, id, int64(from), bytes.NewReader(data[from:to]), vfs.AppendOptions{})
	if err != nil {
		t.Fatalf("append %d..%d: %v", from, to, err)
	}
	if st.Offset != int64(to) {
		t.Fatalf("append %d..%d: offset %d", from, to, st.Offset)
	}
	return st
}

// chunkCount is how many chunks the store holds.
func (e *env) chunkCount(t *testing.T) int {
	t.Helper()
	n := 0
	if err := e.chunks.Walk(ctx, func(chunk.ID) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// fsckClean collects the chunks no longer referenced (cut tails, refused
// appends) and fails the test unless Fsck then finds the stores
// consistent.
func (e *env) fsckClean(t *testing.T) {
	t.Helper()
	if _, err := e.fs.GC(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := e.fs.Fsck(ctx, false)
	if err != nil || !rep.OK() {
		t.Fatalf("fsck: %v, %v", rep, err)
	}
}

// TestStagedPieces appends a file in pieces cut at several points and
// checks that Finish gives back the same bytes, that the chunks are those
// of the same file written at once (the tail is cut again), and that the
// counts add up at every step.
func TestStagedPieces(t *testing.T) {
	const size = 9<<20 + 12345
	cases := []struct {
		name  string
		cuts  []int // offsets at which one append ends and the next begins
		batch int   // refBatch; 0 the default
		every int64 // AppendOptions.Every
	}{
		{"one append", nil, 0, 0},
		{"three pieces", []int{1 << 20, 5<<20 + 7}, 0, 0},
		{"tiny pieces at the start", []int{1, 2, 100, vfs.InlineMax, vfs.InlineMax + 1}, 0, 0},
		{"empty pieces", []int{0, 3 << 20, 3 << 20}, 0, 0},
		{"split commits", []int{2 << 20, 8 << 20}, 2, 0},
		// Each append commits every MiB: segments cut like pieces.
		{"committed as they arrive", []int{3<<20 + 5}, 0, 1 << 20},
		{"committed as they arrive, a segment ending at the end", []int{2 * (1<<20 + 12345)}, 0, 1<<20 + 12345},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := openEnvWith(t, t.TempDir(), vfs.WithRefBatch(vfs.Options{}, c.batch))
			root, err := e.fs.CreateRoot(ctx, "alice", vfs.RootSync)
			if err != nil {
				t.Fatal(err)
			}
			e.root = root
			t.Cleanup(e.close)
			data := randBytes(uint64(i+1), size)
			st := e.stage(t, "big.bin", size, vfs.WriteOptions{})
			from := 0
			for _, to := range append(c.cuts, size) {
				got, err := e.fs.Append(ctx, st.ID, int64(from), bytes.NewReader(data[from:to]), vfs.AppendOptions{Every: c.every})
				if err != nil || got.Offset != int64(to) {
					t.Fatalf("append %d..%d: offset %d, %v", from, to, got.Offset, err)
				}
				e.fsckClean(t)
				from = to
			}
			n, err := e.fs.Finish(ctx, st.ID, vfs.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := e.read(t, n.ID); !bytes.Equal(got, data) {
				t.Fatalf("read back %d bytes, not the %d appended", len(got), len(data))
			}
			if _, err := e.fs.StagedInfo(ctx, st.ID); !errors.Is(err, vfs.ErrNotExist) {
				t.Fatalf("finished upload: %v, want ErrNotExist", err)
			}
			// Leftover chunks of the cut tails go at the next collection.
			if _, err := e.fs.GC(ctx); err != nil {
				t.Fatal(err)
			}
			before := e.chunkCount(t)
			e.write(t, e.root.FolderID, "again.bin", data)
			if after := e.chunkCount(t); after != before {
				t.Fatalf("the same bytes written at once stored %d new chunks", after-before)
			}
			e.fsckClean(t)
		})
	}
}

// TestStagedRefusals checks what Stage, Append and Finish refuse.
func TestStagedRefusals(t *testing.T) {
	data := randBytes(7, 1<<20)
	sum := sha1.Sum(data)
	cases := []struct {
		name string
		run  func(t *testing.T, e *env) error
		want error
	}{
		{"length over max_file_size", func(t *testing.T, e *env) error {
			_, err := e.fs.Stage(ctx, e.root.ID, e.root.FolderID, "a", vfs.StageOptions{Length: 100}, vfs.WriteOptions{MaxFileSize: 99})
			return err
		}, vfs.ErrFileTooLarge},
		{"length over the quota", func(t *testing.T, e *env) error {
			_, err := e.fs.Stage(ctx, e.root.ID, e.root.FolderID, "a", vfs.StageOptions{Length: 100}, vfs.WriteOptions{SpaceQuota: 99})
			return err
		}, vfs.ErrQuotaExceeded},
		{"length past MaxStagedLength", func(t *testing.T, e *env) error {
			_, err := e.fs.Stage(ctx, e.root.ID, e.root.FolderID, "a", vfs.StageOptions{Length: math.MaxInt64}, vfs.WriteOptions{})
			return err
		}, vfs.ErrFileTooLarge},
		{"reservations past what a root's usage sums, without a quota", func(t *testing.T, e *env) error {
			for i := range 100 {
				if _, err := e.fs.Stage(ctx, e.root.ID, e.root.FolderID, fmt.Sprintf("a%d", i), vfs.StageOptions{Length: vfs.MaxStagedLength}, vfs.WriteOptions{}); err != nil {
					return err
				}
			}
			return nil
		}, vfs.ErrQuotaExceeded},
		{"second upload over the quota the first reserved", func(t *testing.T, e *env) error {
			q := vfs.WriteOptions{SpaceQuota: 150}
			e.stage(t, "a", 100, q)
			_, err := e.fs.Stage(ctx, e.root.ID, e.root.FolderID, "b", vfs.StageOptions{Length: 100}, q)
			return err
		}, vfs.ErrQuotaExceeded},
		{"excluded extension", func(t *testing.T, e *env) error {
			_, err := e.fs.Stage(ctx, e.root.ID, e.root.FolderID, "a.exe", vfs.StageOptions{Length: 1}, vfs.WriteOptions{ExcludedExtensions: []string{".exe"}})
			return err
		}, vfs.ErrExtensionExcluded},
		{"invalid name", func(t *testing.T, e *env) error {
			_, err := e.fs.Stage(ctx, e.root.ID, e.root.FolderID, "a/b", vfs.StageOptions{Length: 1}, vfs.WriteOptions{})
			return err
		}, vfs.ErrInvalidName},
		{"name of a folder", func(t *testing.T, e *env) error {
			if _, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "d", vfs.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			_, err := e.fs.Stage(ctx, e.root.ID, e.root.FolderID, "d", vfs.StageOptions{Length: 1}, vfs.WriteOptions{})
			return err
		}, vfs.ErrNameConflict},
		{"wrong offset", func(t *testing.T, e *env) error {
			st := e.stage(t, "a", int64(len(data)), vfs.WriteOptions{})
			e.appendAll(t, st.ID, data, 0, 1000)
			_, err := e.fs.Append(ctx, st.ID, 999, bytes.NewReader(data[999:]), vfs.AppendOptions{})
			return err
		}, vfs.ErrUploadOffset},
		{"more than declared", func(t *testing.T, e *env) error {
			st := e.stage(t, "a", 10, vfs.WriteOptions{})
			_, err := e.fs.Append(ctx, st.ID, 0, bytes.NewReader(data[:11]), vfs.AppendOptions{})
			return err
		}, vfs.ErrFileTooLarge},
		{"checksum mismatch", func(t *testing.T, e *env) error {
			st := e.stage(t, "a", int64(len(data)), vfs.WriteOptions{})
			e.appendAll(t, st.ID, data, 0, 100)
			bad := sum
			bad[0] ^= 1
			_, err := e.fs.Append(ctx, st.ID, 100, bytes.NewReader(data[100:]), vfs.AppendOptions{Hash: sha1.New(), Sum: bad[:]})
			if got, _ := e.fs.StagedInfo(ctx, st.ID); got.Offset != 100 {
				t.Errorf("offset %d after a mismatch, want 100", got.Offset)
			}
			return err
		}, vfs.ErrChecksumMismatch},
		{"checksum match", func(t *testing.T, e *env) error {
			st := e.stage(t, "a", int64(len(data)), vfs.WriteOptions{})
			_, err := e.fs.Append(ctx, st.ID, 0, bytes.NewReader(data), vfs.AppendOptions{Hash: sha1.New(), Sum: sum[:]})
			return err
		}, nil},
		// An append committed in segments (AppendOptions.Every) whose
		// upload another request appended to between two of them: it
		// went on after the other's bytes with the rest of its own,
		// placed where they do not belong (tusd locks an upload on one
		// node only; a client resumes on another after a HEAD there).
		{"another append between two segments of one", func(t *testing.T, e *env) error {
			const every, other = 256 << 10, 300 << 10
			st := e.stage(t, "a", int64(len(data)), vfs.WriteOptions{})
			body := &hookReader{r: bytes.NewReader(data), after: every, hook: func() {
				if _, err := e.fs.Append(ctx, st.ID, every, bytes.NewReader(data[every:other]), vfs.AppendOptions{}); err != nil {
					t.Errorf("the other append: %v", err)
				}
			}}
			_, err := e.fs.Append(ctx, st.ID, 0, body, vfs.AppendOptions{Every: every})
			if got, _ := e.fs.StagedInfo(ctx, st.ID); got.Offset != other {
				t.Errorf("offset %d after the other append, want its end, %d", got.Offset, other)
			}
			return err
		}, vfs.ErrUploadOffset},
		{"finish before the end", func(t *testing.T, e *env) error {
			st := e.stage(t, "a", int64(len(data)), vfs.WriteOptions{})
			e.appendAll(t, st.ID, data, 0, 100)
			_, err := e.fs.Finish(ctx, st.ID, vfs.WriteOptions{})
			return err
		}, vfs.ErrUploadOffset},
		{"finish after the name became a folder", func(t *testing.T, e *env) error {
			st := e.stage(t, "a", 5, vfs.WriteOptions{})
			e.appendAll(t, st.ID, data, 0, 5)
			if _, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "a", vfs.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			_, err := e.fs.Finish(ctx, st.ID, vfs.WriteOptions{})
			return err
		}, vfs.ErrNameConflict},
		{"finish again, as the request that sent the last piece after a HEAD finished it", func(t *testing.T, e *env) error {
			st := e.stage(t, "a", 5, vfs.WriteOptions{})
			e.appendAll(t, st.ID, data, 0, 5)
			first, err := e.fs.Finish(ctx, st.ID, vfs.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			again, err := e.fs.Finish(ctx, st.ID, vfs.WriteOptions{})
			if again.ID != first.ID || again.RevisionID != first.RevisionID {
				t.Errorf("second Finish: file %d rev %d, want the first's %d rev %d", again.ID, again.RevisionID, first.ID, first.RevisionID)
			}
			return err
		}, nil},
		{"append after finish", func(t *testing.T, e *env) error {
			st := e.stage(t, "a", 5, vfs.WriteOptions{})
			e.appendAll(t, st.ID, data, 0, 5)
			if _, err := e.fs.Finish(ctx, st.ID, vfs.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.fs.StagedInfo(ctx, st.ID); !errors.Is(err, vfs.ErrNotExist) {
				t.Errorf("StagedInfo after finish: %v", err)
			}
			if err := e.fs.Terminate(ctx, st.ID); !errors.Is(err, vfs.ErrNotExist) {
				t.Errorf("Terminate after finish: %v", err)
			}
			_, err := e.fs.Append(ctx, st.ID, 5, bytes.NewReader(nil), vfs.AppendOptions{})
			return err
		}, vfs.ErrNotExist},
		{"append after the root's deletion ends the upload", func(t *testing.T, e *env) error {
			st := e.stage(t, "a", int64(len(data)), vfs.WriteOptions{})
			e.appendAll(t, st.ID, data, 0, 100)
			if err := e.fs.DeleteRoot(ctx, e.root.ID); err != nil {
				t.Fatal(err)
			}
			_, err := e.fs.Append(ctx, st.ID, 100, bytes.NewReader(data[100:]), vfs.AppendOptions{})
			if _, ierr := e.fs.StagedInfo(ctx, st.ID); !errors.Is(ierr, vfs.ErrNotExist) {
				t.Errorf("StagedInfo after an append refused for the root: %v, want ErrNotExist (the upload ended)", ierr)
			}
			return err
		}, vfs.ErrRootDeleted},
		{"finish after the root's deletion ends the upload", func(t *testing.T, e *env) error {
			st := e.stage(t, "a", 5, vfs.WriteOptions{})
			e.appendAll(t, st.ID, data, 0, 5)
			if err := e.fs.DeleteRoot(ctx, e.root.ID); err != nil {
				t.Fatal(err)
			}
			_, err := e.fs.Finish(ctx, st.ID, vfs.WriteOptions{})
			if _, ierr := e.fs.StagedInfo(ctx, st.ID); !errors.Is(ierr, vfs.ErrNotExist) {
				t.Errorf("StagedInfo after a finish refused for the root: %v, want ErrNotExist (the upload ended)", ierr)
			}
			return err
		}, vfs.ErrRootDeleted},
		{"append after terminate", func(t *testing.T, e *env) error {
			st := e.stage(t, "a", 5, vfs.WriteOptions{})
			if err := e.fs.Terminate(ctx, st.ID); err != nil {
				t.Fatal(err)
			}
			_, err := e.fs.Append(ctx, st.ID, 0, bytes.NewReader(data[:5]), vfs.AppendOptions{})
			return err
		}, vfs.ErrNotExist},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			if err := c.run(t, e); !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			e.fsckClean(t)
		})
	}
}

// TestStagedTinyAppends appends a byte at a time after a large piece:
// each append cuts the old tail again into a new chunk, and the old one
// goes at once, so the store holds about the upload's bytes, not a tail
// per append until the next collection (about a MiB each before).
func TestStagedTinyAppends(t *testing.T) {
	e := newEnv(t)
	data := randBytes(11, 3<<20+64)
	st := e.stage(t, "a", int64(len(data)), vfs.WriteOptions{})
	e.appendAll(t, st.ID, data, 0, 3<<20)
	for i := 3 << 20; i < len(data); i++ {
		e.appendAll(t, st.ID, data, i, i+1)
	}
	n, err := e.chunks.Size(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n > 2*int64(len(data)) {
		t.Errorf("the store holds %d bytes for an upload of %d", n, len(data))
	}
	if _, err := e.fs.Finish(ctx, st.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.fsckClean(t)
}

// TestStagedSpace checks that an upload's declared length is held against
// the quota from Stage on and given back by Finish (as the file's size),
// Terminate and expiry, the last freeing its chunks too.
func TestStagedSpace(t *testing.T) {
	const quota = 8 << 20
	data := randBytes(3, 3<<20)
	q := vfs.WriteOptions{SpaceQuota: quota}
	cases := []struct {
		name string
		end  func(t *testing.T, e *env, clock *berthtest.Clock, id uint64)
		left int64 // what the quota leaves afterwards
	}{
		{"finish", func(t *testing.T, e *env, clock *berthtest.Clock, id uint64) {
			if _, err := e.fs.Finish(ctx, id, q); err != nil {
				t.Fatal(err)
			}
			// The sweep drops the finished upload's record, which
			// holds nothing, and counts no upload ended.
			clock.Add(time.Hour)
			if n, err := e.fs.ExpireStaged(ctx); n != 0 || err != nil {
				t.Fatalf("expired %d (%v) after the finish", n, err)
			}
			if _, err := e.fs.Finish(ctx, id, q); !errors.Is(err, vfs.ErrNotExist) {
				t.Fatalf("finish after the sweep: %v", err)
			}
		}, quota - int64(len(data))},
		{"terminate", func(t *testing.T, e *env, _ *berthtest.Clock, id uint64) {
			if err := e.fs.Terminate(ctx, id); err != nil {
				t.Fatal(err)
			}
		}, quota},
		{"expiry", func(t *testing.T, e *env, clock *berthtest.Clock, id uint64) {
			clock.Add(59 * time.Minute)
			if n, err := e.fs.ExpireStaged(ctx); n != 0 || err != nil {
				t.Fatalf("expired %d (%v) before the expiry", n, err)
			}
			clock.Add(2 * time.Minute)
			if _, err := e.fs.StagedInfo(ctx, id); !errors.Is(err, vfs.ErrNotExist) {
				t.Fatalf("expired upload: %v", err)
			}
			if n, err := e.fs.ExpireStaged(ctx); n != 1 || err != nil {
				t.Fatalf("expired %d (%v), want 1", n, err)
			}
		}, quota},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, clock := clockedEnv(t)
			st := e.stage(t, "a", int64(len(data)), q)
			if left, _, _ := e.fs.QuotaLeft(ctx, e.root.ID, q); left != quota-int64(len(data)) {
				t.Fatalf("left %d after Stage, want %d", left, quota-len(data))
			}
			// The appends renew the expiry: an hour after the last one.
			clock.Add(50 * time.Minute)
			e.appendAll(t, st.ID, data, 0, 1<<20)
			clock.Add(50 * time.Minute)
			e.appendAll(t, st.ID, data, 1<<20, len(data))
			c.end(t, e, clock, st.ID)
			if left, _, _ := e.fs.QuotaLeft(ctx, e.root.ID, q); left != c.left {
				t.Fatalf("left %d, want %d", left, c.left)
			}
			if _, err := e.fs.GC(ctx); err != nil {
				t.Fatal(err)
			}
			if n := e.chunkCount(t); (n == 0) != (c.left == quota) {
				t.Fatalf("%d chunks stored after the upload ended", n)
			}
			e.fsckClean(t)
		})
	}
}

// TestStagedExpirySweepGoesOn: an expired upload that the sweep cannot
// end, its record or one of its parts damaged, does not keep it from the
// others, which it ends; it reports the damaged one. The sweep stopped
// at the first such upload, and every upload after it kept its chunks
// and its reservation for ever.
func TestStagedExpirySweepGoesOn(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(id uint64) []byte // the key whose value is garbage
	}{
		{"record", vfs.StagedKey},
		{"part", func(id uint64) []byte { return vfs.StagedPartKey(id, 0) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, clock := clockedEnv(t)
			data := randBytes(5, 5<<20) // a sealed part and a tail
			var ids []uint64
			for _, name := range []string{"a", "b", "c"} {
				st := e.stage(t, name, int64(len(data)), vfs.WriteOptions{})
				e.appendAll(t, st.ID, data, 0, len(data)-1)
				ids = append(ids, st.ID)
			}
			if err := e.db.Update(ctx, func(tx kv.Txn) error {
				return tx.Set(tc.damage(ids[0]), []byte{0xff, 0x00})
			}); err != nil {
				t.Fatal(err)
			}
			clock.Add(2 * time.Hour)
			n, err := e.fs.ExpireStaged(ctx)
			if n != 2 || err == nil || !strings.Contains(err.Error(), fmt.Sprint("staged upload ", ids[0])) {
				t.Fatalf("ExpireStaged = %d, %v; want 2 and the damaged upload %d's error", n, err, ids[0])
			}
			for _, id := range ids[1:] {
				if _, err := e.fs.StagedInfo(ctx, id); !errors.Is(err, vfs.ErrNotExist) {
					t.Fatalf("upload %d after the sweep: %v", id, err)
				}
			}
		})
	}
}

// clockedEnv is an env with a root "alice" whose clock the test moves.
func clockedEnv(t *testing.T) (*env, *berthtest.Clock) {
	t.Helper()
	clock := berthtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	e := openEnvWith(t, t.TempDir(), vfs.Options{Now: clock.Now})
	root, err := e.fs.CreateRoot(ctx, "alice", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	e.root = root
	t.Cleanup(e.close)
	return e, clock
}

// slowBody yields data in steps, running step(i) before the i-th: a
// request body that takes its time, during which the clock moves and the
// expiry sweep runs.
type slowBody struct {
	data []byte
	size int
	i    int
	step func(i int)
}

func (b *slowBody) Read(p []byte) (int, error) {
	if len(b.data) == 0 {
		return 0, io.EOF
	}
	b.step(b.i)
	b.i++
	n := copy(p[:min(len(p), b.size)], b.data)
	b.data = b.data[n:]
	return n, nil
}

// TestStagedAppendOutlivesExpiry sends one append that lasts past the
// expiry its upload had when it began (a slow link's PATCH of a large
// file, which commits at its end): the sweep must not end the upload
// under it, and the append keeps every byte. The expiry moved only at
// the commit, so the sweep ended the upload and the commit found it gone.
func TestStagedAppendOutlivesExpiry(t *testing.T) {
	e, clock := clockedEnv(t)
	data := randBytes(17, 3<<20)
	st := e.stage(t, "slow", int64(len(data)), vfs.WriteOptions{}) // an hour to live
	body := &slowBody{data: data, size: 256 << 10, step: func(i int) {
		clock.Add(20 * time.Minute) // 12 steps: four hours in all
		if n, err := e.fs.ExpireStaged(ctx); n != 0 || err != nil {
			t.Errorf("the sweep after %d steps of the append ended %d uploads (%v)", i, n, err)
		}
	}}
	got, err := e.fs.Append(ctx, st.ID, 0, body, vfs.AppendOptions{})
	if err != nil || got.Offset != int64(len(data)) {
		t.Fatalf("the long append: offset %d, %v", got.Offset, err)
	}
	if _, err := e.fs.Finish(ctx, st.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.fsckClean(t)
}

// TestStagedRestart stops the file system half way through an upload,
// cleanly and as a crash would, and goes on over the same stores. A crash
// during an append keeps what it committed every AppendOptions.Every
// bytes; before, an append committed at its end alone, and a crash lost
// every byte of it (tus-js-client sends a whole file as one PATCH).
func TestStagedRestart(t *testing.T) {
	data := randBytes(11, 6<<20+99)
	for _, c := range []struct {
		name  string
		clean bool
		// during: the crash comes while an append committing every MiB
		// waits for its body after 2.5 MiB; else after an append of
		// 2.5 MiB.
		during bool
		kept   int64
	}{
		{"clean", true, false, 5 << 19},
		{"crash", false, false, 5 << 19},
		{"crash during an append", false, true, 2 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			e := openEnv(t, dir)
			root, err := e.fs.CreateRoot(ctx, "alice", vfs.RootSync)
			if err != nil {
				t.Fatal(err)
			}
			st, err := e.fs.Stage(ctx, root.ID, root.FolderID, "a", vfs.StageOptions{Length: int64(len(data))}, vfs.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if c.during {
				pr, pw := io.Pipe()
				ended := make(chan struct{})
				go func() {
					defer close(ended)
					e.fs.Append(ctx, st.ID, 0, pr, vfs.AppendOptions{Every: 1 << 20}) // fails: the store closes under it
				}()
				if _, err := pw.Write(data[:5<<19]); err != nil {
					t.Fatal(err)
				}
				// The body waits for more; the first two MiB are
				// committed meanwhile.
				deadline := time.Now().Add(20 * time.Second)
				for got, _ := e.fs.StagedInfo(ctx, st.ID); got.Offset < c.kept; got, _ = e.fs.StagedInfo(ctx, st.ID) {
					if time.Now().After(deadline) {
						t.Fatalf("an append waiting for its body after 2.5 MiB committed %d bytes, want %d", got.Offset, c.kept)
					}
					time.Sleep(10 * time.Millisecond)
				}
				e.db.Close()
				pw.CloseWithError(errors.New("the process is gone"))
				<-ended
			} else {
				// A request cut off after 2.5 MiB: what arrived is kept.
				if _, err := e.fs.Append(ctx, st.ID, 0, io.LimitReader(bytes.NewReader(data), 5<<19), vfs.AppendOptions{}); err != nil {
					t.Fatal(err)
				}
				if c.clean {
					e.fs.Close()
				}
				e.db.Close()
			}
			e.fs = nil

			e = openEnv(t, filepath.Clean(dir))
			e.root = root
			t.Cleanup(e.close)
			got, err := e.fs.StagedInfo(ctx, st.ID)
			if err != nil || got.Offset != c.kept {
				t.Fatalf("after restart: offset %d, %v, want %d", got.Offset, err, c.kept)
			}
			e.appendAll(t, st.ID, data, int(got.Offset), len(data))
			n, err := e.fs.Finish(ctx, st.ID, vfs.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(e.read(t, n.ID), data) {
				t.Fatal("read back differs")
			}
			e.fsckClean(t)
		})
	}
}

// lostWriters is a StagedHolder that holds every upload but those of the
// owners it names: what the front end decides from shares and accounts.
type lostWriters struct {
	mu    sync.Mutex
	lost  map[string]bool
	asked int // HoldsStaged calls
}

func (l *lostWriters) lose(owner string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lost[owner] = true
}

func (l *lostWriters) HoldsStaged(_ context.Context, st vfs.Staged) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.asked++
	return !l.lost[st.Owner], nil
}

// TestStagedFreeRoomSpaced: writes refused for want of room ask the
// holder about the uploads under the quota once per 10 seconds of a root,
// not twice a request: each asking scans every staged upload of the
// store, and a client at its quota could send refused writes in a loop.
// Before, 5 refused writes asked 10 times.
func TestStagedFreeRoomSpaced(t *testing.T) {
	const quota = 8 << 20
	q := vfs.WriteOptions{SpaceQuota: quota, DeclaredSize: 1 << 20}
	h := &lostWriters{lost: map[string]bool{}}
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	e := openEnvWith(t, t.TempDir(), vfs.Options{Holder: h, Now: clock})
	t.Cleanup(e.close)
	var err error
	if e.root, err = e.fs.CreateRoot(ctx, "alice", vfs.RootShare); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fs.Stage(ctx, e.root.ID, e.root.FolderID, "big", vfs.StageOptions{Length: quota, TTL: time.Hour, Owner: "kept"}, q); err != nil {
		t.Fatal(err)
	}
	write := func() {
		t.Helper()
		_, err := e.fs.WriteFile(ctx, e.root.ID, e.root.FolderID, "w", bytes.NewReader(make([]byte, 1<<20)), q)
		if !errors.Is(err, vfs.ErrQuotaExceeded) {
			t.Fatalf("write: %v, want the quota's refusal", err)
		}
	}
	asked := func() int { h.mu.Lock(); defer h.mu.Unlock(); return h.asked }
	for range 5 {
		write()
	}
	if n := asked(); n != 1 {
		t.Errorf("5 refused writes asked the holder %d times, want 1", n)
	}
	mu.Lock()
	now = now.Add(11 * time.Second)
	mu.Unlock()
	write()
	if n := asked(); n != 2 {
		t.Errorf("a refused write 11 s later: the holder asked %d times in all, want 2", n)
	}
	// A write after the owner lost access, once the root's 10 s have
	// passed, ends the upload and goes through.
	h.lose("kept")
	mu.Lock()
	now = now.Add(11 * time.Second)
	mu.Unlock()
	if _, err := e.fs.WriteFile(ctx, e.root.ID, e.root.FolderID, "w", bytes.NewReader(make([]byte, 1<<20)), q); err != nil {
		t.Fatalf("write once the upload's owner lost access: %v", err)
	}
}

// TestStagedUnheld: an upload whose owner may no longer write its root
// (Options.Holder) gives its reservation back at the next sweep, before
// its expiry, or at once when a write under the same quota is refused for
// want of room; an upload whose owner still may keeps it. Before, such an
// upload, renewed by an append a day, held the root's quota for good.
func TestStagedUnheld(t *testing.T) {
	const quota = 8 << 20
	const tally = 77
	q := vfs.WriteOptions{SpaceQuota: quota}
	tq := vfs.WriteOptions{Quotas: []vfs.Quota{{Tally: tally, Bytes: quota}}}
	// writeDeclared writes a MiB that it declares first, as a tus
	// creation or an upload of a known size does.
	writeDeclared := func(t *testing.T, e *env, opts vfs.WriteOptions) error {
		opts.DeclaredSize = 1 << 20
		_, err := e.fs.WriteFile(ctx, e.root.ID, e.root.FolderID, "w", bytes.NewReader(make([]byte, 1<<20)), opts)
		return err
	}
	cases := []struct {
		name  string
		owner string // of the upload that reserves the whole quota
		// other stages the upload in another root under the tally.
		other bool
		opts  vfs.WriteOptions
		// act is what happens once the owner lost access; it returns how
		// much the quota leaves afterwards, -1 to read it from QuotaLeft.
		act  func(t *testing.T, e *env, opts vfs.WriteOptions) error
		want error
		left int64 // what the quota leaves afterwards
	}{
		{"sweep ends it before its expiry", "lost", false, q, func(t *testing.T, e *env, _ vfs.WriteOptions) error {
			n, err := e.fs.ExpireStaged(ctx)
			if n != 1 {
				t.Errorf("the sweep ended %d uploads, want 1", n)
			}
			return err
		}, nil, quota},
		{"sweep leaves an upload its owner may go on with", "kept", false, q, func(t *testing.T, e *env, _ vfs.WriteOptions) error {
			n, err := e.fs.ExpireStaged(ctx)
			if n != 0 {
				t.Errorf("the sweep ended %d uploads, want 0", n)
			}
			return err
		}, nil, 0},
		{"write of a declared size ends it and goes through", "lost", false, q, writeDeclared, nil, quota - 1<<20},
		{"write of a declared size, its owner may go on", "kept", false, q, writeDeclared, vfs.ErrQuotaExceeded, 0},
		{"stage ends it and goes through", "lost", false, q, func(t *testing.T, e *env, opts vfs.WriteOptions) error {
			_, err := e.fs.Stage(ctx, e.root.ID, e.root.FolderID, "s", vfs.StageOptions{Length: 1 << 20}, opts)
			return err
		}, nil, quota - 1<<20},
		{"refused write of an unknown size frees the room for the next", "lost", false, q, func(t *testing.T, e *env, opts vfs.WriteOptions) error {
			_, err := e.fs.WriteFile(ctx, e.root.ID, e.root.FolderID, "w", bytes.NewReader(make([]byte, 1<<20)), opts)
			if !errors.Is(err, vfs.ErrQuotaExceeded) {
				t.Errorf("first write: %v, want the quota's refusal", err)
			}
			_, err = e.fs.WriteFile(ctx, e.root.ID, e.root.FolderID, "w", bytes.NewReader(make([]byte, 1<<20)), opts)
			return err
		}, nil, quota - 1<<20},
		{"write under a tally ends an upload into another root under it", "lost", true, tq, writeDeclared, nil, quota - 1<<20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := &lostWriters{lost: map[string]bool{}}
			e := openEnvWith(t, t.TempDir(), vfs.Options{Holder: h})
			t.Cleanup(e.close)
			var err error
			if e.root, err = e.fs.CreateRootWith(ctx, "alice", vfs.RootShare, vfs.RootOptions{Tallies: []uint64{tally}}); err != nil {
				t.Fatal(err)
			}
			into := e.root
			if c.other {
				if into, err = e.fs.CreateRootWith(ctx, "bob", vfs.RootShare, vfs.RootOptions{Tallies: []uint64{tally}}); err != nil {
					t.Fatal(err)
				}
			}
			st, err := e.fs.Stage(ctx, into.ID, into.FolderID, "big", vfs.StageOptions{Length: quota, TTL: time.Hour, Owner: c.owner}, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			h.lose("lost")
			if err := c.act(t, e, c.opts); !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			if left, _, _ := e.fs.QuotaLeft(ctx, e.root.ID, c.opts); left != c.left {
				t.Errorf("the quota leaves %d, want %d", left, c.left)
			}
			_, err = e.fs.StagedInfo(ctx, st.ID)
			if gone := errors.Is(err, vfs.ErrNotExist); gone != (c.owner == "lost") {
				t.Errorf("upload of %s: %v", c.owner, err)
			}
			e.fsckClean(t)
		})
	}
}

// TestStagedFreeRoomScope: a write refused for want of room ends the
// lost uploads counted against the quotas that refused it, and no
// others. Every root counts into the tallies of its organization's
// ancestors too; before, a refusal under one organization's quota asked
// about, and ended, the uploads into the roots of every other
// organization under the same parent (tenants of one host).
func TestStagedFreeRoomScope(t *testing.T) {
	const quota = 8 << 20
	const top, orgA, orgB = 70, 71, 72 // tallies: a parent and two tenants
	tq := vfs.WriteOptions{Quotas: []vfs.Quota{{Tally: orgA, Bytes: quota}}, DeclaredSize: 1 << 20}
	cases := []struct {
		name string
		// bob is the tally of the other root, into which an owner who
		// lost access staged an upload of the whole quota.
		bob uint64
		// fill fills orgA's quota with an upload its owner may go on with.
		fill      bool
		want      error // of the write into alice's root
		bobEnded  bool
		bobAsking bool // whether the holder is asked about bob's upload
	}{
		{"an upload under the refused tally ends", orgA, false, nil, true, true},
		{"an upload of another tenant under the same parent stays", orgB, true, vfs.ErrQuotaExceeded, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := &lostWriters{lost: map[string]bool{}}
			e := openEnvWith(t, t.TempDir(), vfs.Options{Holder: h})
			t.Cleanup(e.close)
			alice, err := e.fs.CreateRootWith(ctx, "alice", vfs.RootShare, vfs.RootOptions{Tallies: []uint64{top, orgA}})
			if err != nil {
				t.Fatal(err)
			}
			bob, err := e.fs.CreateRootWith(ctx, "bob", vfs.RootShare, vfs.RootOptions{Tallies: []uint64{top, c.bob}})
			if err != nil {
				t.Fatal(err)
			}
			if c.fill {
				if _, err := e.fs.Stage(ctx, alice.ID, alice.FolderID, "kept", vfs.StageOptions{Length: quota, TTL: time.Hour, Owner: "kept"}, vfs.WriteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			st, err := e.fs.Stage(ctx, bob.ID, bob.FolderID, "big", vfs.StageOptions{Length: quota, TTL: time.Hour, Owner: "lost"}, vfs.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			h.lose("lost")
			_, err = e.fs.WriteFile(ctx, alice.ID, alice.FolderID, "w", bytes.NewReader(make([]byte, 1<<20)), tq)
			if !errors.Is(err, c.want) {
				t.Fatalf("write into alice's root: %v, want %v", err, c.want)
			}
			_, err = e.fs.StagedInfo(ctx, st.ID)
			if ended := errors.Is(err, vfs.ErrNotExist); ended != c.bobEnded {
				t.Errorf("bob's upload ended: %v, want %v (%v)", ended, c.bobEnded, err)
			}
			h.mu.Lock()
			asked := h.asked
			h.mu.Unlock()
			if want := map[bool]int{false: 0, true: 1}[c.bobAsking] + map[bool]int{false: 0, true: 1}[c.fill]; asked != want {
				t.Errorf("the holder was asked %d times, want %d", asked, want)
			}
			e.fsckClean(t)
		})
	}
}

// TestStagedFreeRoomForgotten: the sweep drops the freeRoom throttle's
// time of a root once its 10 seconds have passed. Before, the map kept
// one entry for every root ever refused a write, deleted ones included,
// for the life of the process.
func TestStagedFreeRoomForgotten(t *testing.T) {
	const roots = 3
	cases := []struct {
		name  string
		after time.Duration // from the refusals to the sweep
		want  int           // roots the throttle remembers after the sweep
	}{
		{"within 10 s the times stay", 5 * time.Second, roots},
		{"after 10 s the sweep drops them", 11 * time.Second, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			now := time.Now()
			clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
			e := openEnvWith(t, t.TempDir(), vfs.Options{Holder: &lostWriters{lost: map[string]bool{}}, Now: clock})
			t.Cleanup(e.close)
			q := vfs.WriteOptions{SpaceQuota: 1 << 20, DeclaredSize: 2 << 20}
			for i := range roots {
				r, err := e.fs.CreateRoot(ctx, fmt.Sprint("r", i), vfs.RootShare)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := e.fs.WriteFile(ctx, r.ID, r.FolderID, "w", bytes.NewReader(make([]byte, 2<<20)), q); !errors.Is(err, vfs.ErrQuotaExceeded) {
					t.Fatalf("write: %v, want the quota's refusal", err)
				}
			}
			if n := e.fs.RoomFreedRoots(); n != roots {
				t.Fatalf("the throttle remembers %d roots after the refusals, want %d", n, roots)
			}
			mu.Lock()
			now = now.Add(c.after)
			mu.Unlock()
			if _, err := e.fs.ExpireStaged(ctx); err != nil {
				t.Fatal(err)
			}
			if n := e.fs.RoomFreedRoots(); n != c.want {
				t.Errorf("the throttle remembers %d roots after the sweep, want %d", n, c.want)
			}
		})
	}
}

// TestStagedEach: EachStaged yields the uploads in progress, in id order,
// across as many transactions as its batch takes, and leaves out those
// finished, terminated, expired or into a deleted root; kv.ErrStop ends
// it early without an error.
func TestStagedEach(t *testing.T) {
	for _, batch := range []int{1, 2, 3, 0} {
		t.Run(fmt.Sprint("batch ", batch), func(t *testing.T) {
			clock := berthtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			e := newEnvWith(t, vfs.WithStagedBatch(vfs.Options{Now: clock.Now}, batch))
			other, err := e.fs.CreateRoot(ctx, "bob", vfs.RootSync)
			if err != nil {
				t.Fatal(err)
			}
			stage := func(root vfs.Root, name string, ttl time.Duration) vfs.Staged {
				t.Helper()
				st, err := e.fs.Stage(ctx, root.ID, root.FolderID, name, vfs.StageOptions{Length: 5, TTL: ttl, Owner: name}, vfs.WriteOptions{})
				if err != nil {
					t.Fatal(err)
				}
				return st
			}
			var want []uint64
			keep := stage(e.root, "a", time.Hour)
			want = append(want, keep.ID)
			e.appendAll(t, keep.ID, []byte("01234"), 0, 2)
			fin := stage(e.root, "finished", time.Hour)
			e.appendAll(t, fin.ID, []byte("01234"), 0, 5)
			if _, err := e.fs.Finish(ctx, fin.ID, vfs.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := e.fs.Terminate(ctx, stage(e.root, "terminated", time.Hour).ID); err != nil {
				t.Fatal(err)
			}
			stage(e.root, "expired", time.Minute)
			stage(other, "deleted root", time.Hour)
			for _, n := range []string{"b", "c", "d"} {
				want = append(want, stage(e.root, n, time.Hour).ID)
			}
			if err := e.fs.DeleteRoot(ctx, other.ID); err != nil {
				t.Fatal(err)
			}
			clock.Add(2 * time.Minute)
			var got []uint64
			err = e.fs.EachStaged(ctx, func(st vfs.Staged) error {
				got = append(got, st.ID)
				if st.ID == keep.ID && (st.Offset != 2 || st.Length != 5 || st.Reserved != 5 || st.Owner != "a" || st.Name != "a") {
					t.Errorf("upload %+v, want offset 2 of 5, 5 reserved, owner and name a", st)
				}
				return nil
			})
			if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("EachStaged: %v, %v; want %v", got, err, want)
			}
			got = nil
			err = e.fs.EachStaged(ctx, func(st vfs.Staged) error {
				if got = append(got, st.ID); len(got) == 2 {
					return kv.ErrStop
				}
				return nil
			})
			if err != nil || fmt.Sprint(got) != fmt.Sprint(want[:2]) {
				t.Fatalf("EachStaged stopped at the second: %v, %v; want %v", got, err, want[:2])
			}
		})
	}
}

// hookReader reads r and runs hook once, at the first read after it gave
// after bytes: what another request does while an append's body arrives.
type hookReader struct {
	r     io.Reader
	after int
	n     int
	hook  func()
}

func (h *hookReader) Read(p []byte) (int, error) {
	if h.n >= h.after && h.hook != nil {
		h.hook()
		h.hook = nil
	}
	if h.hook != nil {
		p = p[:min(len(p), h.after-h.n)]
	}
	n, err := h.r.Read(p)
	h.n += n
	return n, err
}
