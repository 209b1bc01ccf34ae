package vfs_test

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"berth/vfs"
)

// The benchmarks compare vfs with the machine's own limits in the same run:
// Raw* write and read the same bytes to a plain file (fsynced), vfs* go
// through chunking, hashing, compression, the chunk store and Badger.
// Run: go test -run '^$' -bench . -benchtime 3x ./vfs

const benchSize = 256 << 20

var benchData = sync.OnceValues(func() ([]byte, []byte) {
	random := randBytes(1, benchSize)
	// Compressible: text-like, repeating with variation, about 3:1 for zstd.
	var buf bytes.Buffer
	for i := 0; buf.Len() < benchSize; i++ {
		fmt.Fprintf(&buf, "%08d the quick brown fox %d jumps over the lazy dog %x\n", i, i%97, i*7919)
	}
	return random, buf.Bytes()[:benchSize]
})

func benchInputs() map[string][]byte {
	random, text := benchData()
	return map[string][]byte{"random": random, "compressible": text}
}

// cpuPerGiB reports, when the function it returns runs, the process's CPU
// time (user and system, all goroutines) per GiB over b.N rounds of size
// bytes: the cost of the write path that wall time under load hides.
func cpuPerGiB(b *testing.B, size int64) func() {
	cpu := func() float64 {
		var ru unix.Rusage
		if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
	}
	start := cpu()
	return func() {
		b.ReportMetric((cpu()-start)/(float64(size)*float64(b.N)/(1<<30)), "cpu-s/GiB")
	}
}

func BenchmarkWrite(b *testing.B) {
	for _, kind := range []string{"random", "compressible"} {
		data := benchInputs()[kind]
		b.Run("raw/"+kind, func(b *testing.B) {
			dir := b.TempDir()
			b.SetBytes(int64(len(data)))
			for i := 0; b.Loop(); i++ {
				f, err := os.Create(filepath.Join(dir, fmt.Sprint(i)))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := f.Write(data); err != nil {
					b.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
		})
		b.Run("vfs/"+kind, func(b *testing.B) {
			e := newEnv(b)
			b.SetBytes(int64(len(data)))
			defer cpuPerGiB(b, int64(len(data)))()
			for i := 0; b.Loop(); i++ {
				// Each round a new file of new chunks: change the first
				// bytes of every MiB so nothing deduplicates.
				b.StopTimer()
				for off := 0; off < len(data); off += 1 << 20 {
					data[off] = byte(i + 1)
				}
				b.StartTimer()
				e.write(b, e.root.FolderID, fmt.Sprint(i), data)
			}
		})
	}
}

func BenchmarkRead(b *testing.B) {
	for _, kind := range []string{"random", "compressible"} {
		data := benchInputs()[kind]
		for _, cold := range []bool{false, true} {
			temp := "warm"
			if cold {
				temp = "cold"
			}
			b.Run("raw/"+kind+"/"+temp, func(b *testing.B) {
				p := filepath.Join(b.TempDir(), "f")
				if err := os.WriteFile(p, data, 0o600); err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(data)))
				buf := make([]byte, 1<<20)
				for b.Loop() {
					if cold {
						b.StopTimer()
						evict(b, p)
						b.StartTimer()
					}
					f, err := os.Open(p)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := io.CopyBuffer(io.Discard, onlyReader{f}, buf); err != nil {
						b.Fatal(err)
					}
					f.Close()
				}
			})
			b.Run("vfs/"+kind+"/"+temp, func(b *testing.B) {
				e := newEnv(b)
				n := e.write(b, e.root.FolderID, "f", data)
				b.SetBytes(int64(len(data)))
				buf := make([]byte, 1<<20)
				for b.Loop() {
					if cold {
						b.StopTimer()
						evictTree(b, filepath.Join(e.dir, "chunks"))
						b.StartTimer()
					}
					f, err := e.fs.Open(ctx, e.root.ID, n.ID)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := io.CopyBuffer(io.Discard, onlyReader{f}, buf); err != nil {
						b.Fatal(err)
					}
					f.Close()
				}
			})
		}
	}
}

// onlyReader hides WriterTo/ReaderFrom so both sides copy the same way.
type onlyReader struct{ io.Reader }

// evict drops a file's pages from the page cache, so a read comes from disk.
func evict(b *testing.B, p string) {
	f, err := os.Open(p)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		b.Skipf("fadvise: %v", err)
	}
}

func evictTree(b *testing.B, dir string) {
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			evict(b, p)
		}
		return nil
	})
}

// BenchmarkList lists a folder of 10,000 files (target: under 20 ms).
func BenchmarkList(b *testing.B) {
	e := newEnv(b)
	fillFolder(b, e, 10000)
	for b.Loop() {
		kids, _, err := e.fs.List(ctx, e.root.ID, e.root.FolderID)
		if err != nil || len(kids) != 10000 {
			b.Fatal(len(kids), err)
		}
	}
}

// BenchmarkWriteAtSmall writes 4 KiB files by path into a folder below
// the top one, one at a time, as a WebDAV PUT of a small file does
// (WriteAt: one transaction finds the folder, checks and commits): the
// CPU and allocations of a small write in vfs and the store, without
// HTTP, and steadier than bench/webdav's SmallWrites on a busy machine.
// Commits are unsynced unless BERTH_BENCH_SYNC is set.
func BenchmarkWriteAtSmall(b *testing.B) {
	e := newEnv(b)
	if _, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "d", vfs.WriteOptions{}); err != nil {
		b.Fatal(err)
	}
	body := randBytes(1, 4096)
	b.ReportAllocs()
	cpu := cpuTime()
	i := 0
	for b.Loop() {
		i++
		p := fmt.Sprintf("/d/f%06d.bin", i)
		if _, _, err := e.fs.WriteAt(ctx, e.root.ID, p, bytes.NewReader(body), vfs.WriteOptions{DeclaredSize: 4096}, nil); err != nil {
			b.Fatal(err)
		}
	}
	// The process's CPU: the commits wait for the store's writer, so
	// time per write is mostly latency with one writer.
	b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
}

// BenchmarkMoveAt moves a folder holding a small file below the top one
// to another name beside it and back, as a WebDAV MOVE of a sync
// client's cycle does: "lookup+Move" looks both paths up in a read
// transaction of its own, then moves by id (LookupMove, Move: the way
// before MoveAt), "MoveAt" looks them up in the move's commit. The CPU
// and allocations of a move in vfs and the store, without HTTP, each
// way in the same process. Commits are unsynced unless BERTH_BENCH_SYNC
// is set.
func BenchmarkMoveAt(b *testing.B) {
	for _, way := range []struct {
		name string
		move func(e *env, src, dst string) error
	}{
		{"lookup+Move", func(e *env, src, dst string) error {
			sn, srcErr, parent, _, _, err := e.fs.LookupMove(ctx, e.root.ID, src, dst)
			if err = cmp.Or(srcErr, err); err != nil {
				return err
			}
			_, err = e.fs.Move(ctx, e.root.ID, sn.ID, parent.ID, path.Base(dst), vfs.WriteOptions{})
			return err
		}},
		{"MoveAt", func(e *env, src, dst string) error {
			_, _, err := e.fs.MoveAt(ctx, e.root.ID, src, dst, vfs.WriteOptions{}, nil)
			return err
		}},
	} {
		b.Run(way.name, func(b *testing.B) {
			e := newEnv(b)
			d, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "sync", vfs.WriteOptions{})
			if err == nil {
				d, err = e.fs.Mkdir(ctx, e.root.ID, d.ID, "d0", vfs.WriteOptions{})
			}
			if err != nil {
				b.Fatal(err)
			}
			e.write(b, d.ID, "f.bin", randBytes(1, 4096))
			paths := [2]string{"/sync/d0", "/sync/d1"}
			b.ReportAllocs()
			cpu := cpuTime()
			i := 0
			for b.Loop() {
				if err := way.move(e, paths[i%2], paths[(i+1)%2]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCreateSmallFiles creates 10,000 files of 1 KiB, each durable
// when WriteFile returns, from one writer and from eight.
func BenchmarkCreateSmallFiles(b *testing.B) {
	for _, writers := range []int{1, 8} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				e := newEnv(b)
				b.StartTimer()
				fillFolder(b, e, 10000, writers)
				b.StopTimer()
				e.close()
				b.StartTimer()
			}
			b.ReportMetric(float64(10000*b.N)/b.Elapsed().Seconds(), "files/s")
		})
	}
}

func fillFolder(b *testing.B, e *env, n int, writers ...int) {
	w := 4
	if len(writers) > 0 {
		w = writers[0]
	}
	var wg sync.WaitGroup
	for g := range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += w {
				body := randBytes(uint64(i), 1024)
				if _, err := e.fs.WriteFile(ctx, e.root.ID, e.root.FolderID, fmt.Sprintf("file-%05d.txt", i), bytes.NewReader(body), vfs.WriteOptions{}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkZip zips a folder to io.Discard, from a fresh layout as a
// download does: large files (32 of 4 MiB, random, as most large files
// are), medium ones (400 of 64 KiB, each its own chunks) and small ones
// (2,000 of 4 KiB of text, kept inline, in 20 subfolders). The
// segments case reads the small ones' archive as a download fetched in
// 16 parallel segments does: 16 requests at once, each a Zip of the
// folder read over its sixteenth.
func BenchmarkZip(b *testing.B) {
	for _, c := range []struct {
		name        string
		files, size int
		dirs        int
		segments    int
	}{
		{"large", 32, 4 << 20, 1, 0},
		{"medium", 400, 64 << 10, 4, 0},
		{"small", 2000, 4 << 10, 20, 0},
		{"small-16-segments", 2000, 4 << 10, 20, 16},
	} {
		b.Run(c.name, func(b *testing.B) {
			e := newEnv(b)
			var total int64
			for d := range c.dirs {
				dir, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, fmt.Sprintf("dir-%02d", d), vfs.WriteOptions{})
				if err != nil {
					b.Fatal(err)
				}
				for i := range c.files / c.dirs {
					data := randBytes(uint64(d*100000+i), c.size)
					if c.size <= vfs.InlineMax {
						var buf bytes.Buffer
						for buf.Len() < c.size {
							fmt.Fprintf(&buf, "%d/%d the quick brown fox jumps over the lazy dog\n", d, i)
						}
						data = buf.Bytes()[:c.size]
					}
					e.write(b, dir.ID, fmt.Sprintf("f-%04d", i), data)
					total += int64(len(data))
				}
			}
			b.SetBytes(total)
			cpu := cpuTime()
			if c.segments > 0 {
				benchZipSegments(b, e, c.segments)
			} else {
				for b.Loop() {
					if err := e.fs.WriteZip(ctx, io.Discard, e.root.ID, e.root.FolderID, vfs.ZipOptions{}); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}

// benchZipSegments reads e's root's archive in n segments at once, each
// through a Zip of its own, of one requester.
func benchZipSegments(b *testing.B, e *env, n int) {
	z, err := e.fs.Zip(ctx, e.root.ID, e.root.FolderID, vfs.ZipOptions{})
	if err != nil {
		b.Fatal(err)
	}
	size := z.Size()
	z.Close()
	for b.Loop() {
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Go(func() {
				z, err := e.fs.Zip(ctx, e.root.ID, e.root.FolderID, vfs.ZipOptions{Requester: "segments"})
				if err != nil {
					errs <- err
					return
				}
				defer z.Close()
				r := z.Reader(ctx)
				defer r.Close()
				from, to := int64(i)*size/int64(n), int64(i+1)*size/int64(n)
				if _, err := r.Seek(from, io.SeekStart); err != nil {
					errs <- err
					return
				}
				if _, err := io.CopyN(io.Discard, r, to-from); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
	}
}
