package vfs_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"berth/vfs"
)

// crashSizes are the sizes of the files the child writes before it is
// killed: empty, small, chunk-sized and several chunks.
var crashSizes = []int{0, 1, 4096, 1 << 20, 3<<20 + 5, 64 << 10}

// TestCrashChild is the child of TestCrashSafety, run in its own process.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv("BERTH_CRASH_DIR")
	if dir == "" {
		t.Skip("only run as the child of TestCrashSafety")
	}
	e := openEnv(t, dir)
	root, err := e.fs.CreateRoot(ctx, "crash", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("root %d %d\n", root.ID, root.FolderID)
	for i, size := range crashSizes {
		n, err := e.fs.WriteFile(ctx, root.ID, root.FolderID, fmt.Sprintf("f%d", i), bytes.NewReader(randBytes(uint64(i), size)), vfs.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("done %d %d\n", i, n.ID)
	}
	// Overwrite f1 slowly: the parent kills us in the middle, and f1 must
	// keep its old contents.
	fmt.Println("slow")
	slow := &slowReader{r: bytes.NewReader(randBytes(99, 48<<20))}
	e.fs.WriteFile(ctx, root.ID, root.FolderID, "f1", slow, vfs.WriteOptions{})
	e.fs.WriteFile(ctx, root.ID, root.FolderID, "never", slow, vfs.WriteOptions{})
	t.Fatal("not killed")
}

type slowReader struct{ r io.Reader }

func (s *slowReader) Read(p []byte) (int, error) {
	time.Sleep(2 * time.Millisecond)
	return s.r.Read(p[:min(len(p), 64<<10)])
}

// TestCrashSafety kills a writer mid-write with SIGKILL and checks that
// every write that returned is intact, the interrupted one is invisible,
// and nothing leaks or goes missing.
func TestCrashSafety(t *testing.T) {
	for round := range 3 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			dir := t.TempDir()
			cmd, out := startChild(t, "TestCrashChild", "BERTH_CRASH_DIR="+dir)
			var rootID uint64
			ids := map[int]uint64{}
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				line := sc.Text()
				var i int
				var id, folder uint64
				switch {
				case strings.HasPrefix(line, "root "):
					fmt.Sscanf(line, "root %d %d", &rootID, &folder)
				case strings.HasPrefix(line, "done "):
					fmt.Sscanf(line, "done %d %d", &i, &id)
					ids[i] = id
				}
				if line == "slow" {
					break
				}
			}
			// Kill once the slow write has stored chunks, at a different
			// point of it each round.
			base := countChunkFiles(t, dir)
			for deadline := time.Now().Add(10 * time.Second); countChunkFiles(t, dir) <= base && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(time.Duration(100*round) * time.Millisecond)
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			if len(ids) != len(crashSizes) {
				t.Fatalf("child finished %d writes", len(ids))
			}

			left := countChunkFiles(t, dir)
			e := openEnv(t, dir)
			defer e.close()
			e.root = vfs.Root{ID: rootID}
			for i, size := range crashSizes {
				if got := e.read(t, ids[i]); !bytes.Equal(got, randBytes(uint64(i), size)) {
					t.Errorf("f%d: contents differ after the crash", i)
				}
			}
			if _, err := e.fs.Lookup(context.Background(), rootID, "/never"); err == nil {
				t.Error("the interrupted write is visible")
			}
			revs, err := e.fs.Revisions(ctx, rootID, ids[1])
			if err != nil || len(revs) != 1 {
				t.Errorf("f1 has %d revisions after an interrupted overwrite (%v)", len(revs), err)
			}
			rep, err := e.fs.Fsck(ctx, true)
			if err != nil || !rep.OK() {
				t.Fatalf("fsck after the crash: %v (%v)", rep, err)
			}
			after := countChunkFiles(t, dir)
			t.Logf("fsck: %v; the killed write had left %d chunk files, recovery removed them", rep, left-after)
			if left <= after || after != rep.Chunks {
				t.Errorf("the kill left no partial chunks (%d files): the test did not interrupt a write", left)
			}
		})
	}
}

func countChunkFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(filepath.Join(dir, "chunks"), func(p string, d fs.DirEntry, err error) error {
		// Staged (temp-named) chunk files count: an interrupted upload
		// may leave either kind.
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// startChild runs the test binary's test named test in a child process
// with env added, and returns it with its standard output (what it has
// made durable so far, line by line); the caller kills it.
func startChild(t *testing.T, test string, env ...string) (*exec.Cmd, io.ReadCloser) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, out
}
