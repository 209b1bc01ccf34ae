package vfs_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"berth/vfs"
)

// TestSplitCrashChild is the child of TestSplitCrashSafety, run in its own
// process: it stores a few things, then starts a split operation and
// stops between two of its transactions, to be killed there.
func TestSplitCrashChild(t *testing.T) {
	dir, mode := os.Getenv("BERTH_SPLIT_CRASH_DIR"), os.Getenv("BERTH_SPLIT_CRASH_MODE")
	if dir == "" {
		t.Skip("only run as the child of TestSplitCrashSafety")
	}
	var armed atomic.Bool
	opts := vfs.WithBatchHook(vfs.WithRefBatch(vfs.Options{}, tinyBatch), func(op vfs.Op) {
		if armed.Load() && string(op) == mode {
			fmt.Println("paused")
			select {}
		}
	})
	e := openEnvWith(t, dir, opts)
	root, err := e.fs.CreateRoot(ctx, "crash", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	e.root = root
	fmt.Printf("root %d\n", root.ID)
	keep := e.write(t, root.FolderID, "keep", randBytes(40, 5<<20))
	fmt.Printf("keep %d\n", keep.ID)
	d, err := e.fs.Mkdir(ctx, root.ID, root.FolderID, "d", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.write(t, d.ID, "a", []byte("small"))
	e.write(t, d.ID, "b", randBytes(41, 20<<10))
	e.write(t, d.ID, "big", randBytes(42, 4<<20))
	gone := e.write(t, root.FolderID, "gone", randBytes(43, 4<<20))
	if err := e.fs.Delete(ctx, root.ID, gone.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("gone %d\n", gone.ID)
	u, err := e.fs.Usage(ctx, root.ID)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("usage %d %d %d %d\n", u.FileCount, u.FolderCount, u.DelFileCount, u.PhysicalSize)
	armed.Store(true)
	switch vfs.Op(mode) {
	case vfs.OpWrite:
		_, err = e.fs.WriteFile(ctx, root.ID, root.FolderID, "new", bytes.NewReader(randBytes(44, 5<<20)), vfs.WriteOptions{})
	case vfs.OpCopy:
		_, err = e.fs.Copy(ctx, root.ID, d.ID, root.ID, root.FolderID, "d2", vfs.WriteOptions{})
	case vfs.OpPurge:
		err = e.fs.Purge(ctx, root.ID, gone.ID)
	}
	t.Fatalf("%s did not pause between batches (%v)", mode, err)
}

// TestSplitCrashSafety kills a process with SIGKILL between two
// transactions of a split write, copy and purge, and checks that the next
// Open releases what the operation held: earlier writes intact, the
// interrupted write and copy invisible, the purged file gone, usage exact,
// fsck clean.
func TestSplitCrashSafety(t *testing.T) {
	for _, op := range []vfs.Op{vfs.OpWrite, vfs.OpCopy, vfs.OpPurge} {
		t.Run(string(op), func(t *testing.T) {
			dir := t.TempDir()
			cmd, out := startChild(t, "TestSplitCrashChild", "BERTH_SPLIT_CRASH_DIR="+dir, "BERTH_SPLIT_CRASH_MODE="+string(op))
			var rootID, keepID, goneID uint64
			var files, folders, delFiles, physical int64
			paused := false
			sc := bufio.NewScanner(out)
			timer := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
			for !paused && sc.Scan() {
				line := sc.Text()
				switch {
				case strings.HasPrefix(line, "root "):
					fmt.Sscanf(line, "root %d", &rootID)
				case strings.HasPrefix(line, "keep "):
					fmt.Sscanf(line, "keep %d", &keepID)
				case strings.HasPrefix(line, "gone "):
					fmt.Sscanf(line, "gone %d", &goneID)
				case strings.HasPrefix(line, "usage "):
					fmt.Sscanf(line, "usage %d %d %d %d", &files, &folders, &delFiles, &physical)
				case line == "paused":
					paused = true
				}
			}
			timer.Stop()
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			if !paused {
				t.Fatal("the child never paused between batches")
			}

			var logs bytes.Buffer
			e := openEnvWith(t, dir, vfs.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			defer e.close()
			e.root = vfs.Root{ID: rootID}
			if !strings.Contains(logs.String(), "released the references of interrupted operations") {
				t.Errorf("open released nothing: %s", logs.String())
			}
			if got := e.read(t, keepID); !bytes.Equal(got, randBytes(40, 5<<20)) {
				t.Error("keep differs after the crash")
			}
			for _, p := range []string{"/new", "/d2"} {
				if _, err := e.fs.Lookup(ctx, rootID, p); err == nil {
					t.Errorf("%s is visible after the crash", p)
				}
			}
			if op == vfs.OpPurge {
				if _, err := e.fs.Stat(ctx, rootID, goneID); !errors.Is(err, vfs.ErrNotExist) {
					t.Errorf("the purged file: %v", err)
				}
				delFiles, physical = delFiles-1, physical-4<<20
			}
			u, err := e.fs.Usage(ctx, rootID)
			if err != nil {
				t.Fatal(err)
			}
			if u.FileCount != files || u.FolderCount != folders || u.DelFileCount != delFiles || u.PhysicalSize != physical {
				t.Errorf("usage after the crash %+v, want %d files, %d folders, %d deleted, %d bytes", u, files, folders, delFiles, physical)
			}
			rep, err := e.fs.Fsck(ctx, true)
			if err != nil || !rep.OK() {
				t.Fatalf("fsck after the crash: %v (%v)", rep, err)
			}
			if n, err := e.fs.IntentParts(ctx); err != nil || n != 0 {
				t.Fatalf("%d intent parts left (%v)", n, err)
			}
			if n := countChunkFiles(t, dir); n != rep.Chunks {
				t.Fatalf("%d chunk files, fsck counted %d", n, rep.Chunks)
			}
		})
	}
}
