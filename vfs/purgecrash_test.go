package vfs_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"berth/vfs"
)

// The tallies of the purge crash fixture: an organization's, its parent's,
// and the owners' of its roots (big's, small's, keep's and victim's).
const (
	pcOrg, pcParent          = 70, 80
	pcBigOwner, pcSmallOwner = 90, 92
	pcKeepOwner              = 91
)

// pcFile is a file of the fixture whose contents the parent checks.
type pcFile struct {
	root, id, seed uint64
	size           int
}

// pcFixture is a data directory with a live root keep (files checked byte
// for byte), a live root victim (files, folders, properties), and two
// deleted roots not purged yet: big (a few thousand files in several
// folders, some with properties and revisions, some deleted) and small.
type pcFixture struct {
	dir                      string
	keep, victim, big, small vfs.Root
	files                    []pcFile // keep's
}

// buildPurgeFixture builds the fixture once; each kill point copies it.
func buildPurgeFixture(t *testing.T, bigFiles int) pcFixture {
	t.Helper()
	f := pcFixture{dir: t.TempDir()}
	e := openEnv(t, f.dir)
	defer e.close()
	mk := func(name string, tallies ...uint64) vfs.Root {
		r, err := e.fs.CreateRootWith(ctx, name, vfs.RootSync, vfs.RootOptions{Tallies: tallies})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	f.keep = mk("keep", pcOrg, pcParent, pcKeepOwner)
	f.big = mk("big", pcOrg, pcParent, pcBigOwner)
	f.small = mk("small", pcOrg, pcParent, pcSmallOwner)
	f.victim = mk("victim", pcOrg, pcParent, pcKeepOwner)
	write := func(r vfs.Root, parent uint64, name string, seed uint64, size int) vfs.Node {
		n, err := e.fs.WriteFile(ctx, r.ID, parent, name, bytes.NewReader(randBytes(seed, size)), vfs.WriteOptions{})
		if err != nil {
			t.Fatalf("write %s: %v", name, err)
		}
		return n
	}
	for i, size := range []int{0, 1, 4096, 20 << 10, 1<<20 + 3, 3<<20 + 5} {
		seed := uint64(500 + i)
		n := write(f.keep, f.keep.FolderID, fmt.Sprintf("k%d", i), seed, size)
		f.files = append(f.files, pcFile{f.keep.ID, n.ID, seed, size})
	}
	// keep's k3 has an older revision too, and a property.
	n := write(f.keep, f.keep.FolderID, "k3", 510, 30<<10)
	f.files[3] = pcFile{f.keep.ID, n.ID, 510, 30 << 10}
	if err := e.fs.PatchProps(ctx, f.keep.ID, n.ID, map[string][]byte{"p": []byte("keep")}, nil, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	fill := func(r vfs.Root, files int, seed0 uint64) {
		var dirs []uint64
		for d := range 4 {
			dn, err := e.fs.Mkdir(ctx, r.ID, r.FolderID, fmt.Sprintf("d%d", d), vfs.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			sub, err := e.fs.Mkdir(ctx, r.ID, dn.ID, "sub", vfs.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			dirs = append(dirs, dn.ID, sub.ID)
			if d%2 == 0 {
				if err := e.fs.PatchProps(ctx, r.ID, dn.ID, map[string][]byte{"folder": []byte(strings.Repeat("x", 300))}, nil, vfs.WriteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}
		for i := range files {
			parent := dirs[i%len(dirs)]
			size := 500 + i%700
			if i%6 == 0 {
				size = 17<<10 + i // chunked: most purge batches give chunks back
			}
			seed := seed0 + uint64(i)
			n := write(r, parent, fmt.Sprintf("f%05d", i), seed, size)
			if i%10 == 0 {
				if err := e.fs.PatchProps(ctx, r.ID, n.ID, map[string][]byte{"a": []byte("1"), "b": bytes.Repeat([]byte("v"), 200)}, nil, vfs.WriteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if i%25 == 0 {
				write(r, parent, fmt.Sprintf("f%05d", i), seed+1<<32, size+100)
			}
			if i%97 == 0 {
				if err := e.fs.Delete(ctx, r.ID, n.ID, vfs.WriteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	fill(f.big, bigFiles, 10000)
	fill(f.small, 40, 90000)
	fill(f.victim, 60, 95000)
	for _, r := range []vfs.Root{f.big, f.small} {
		if err := e.fs.DeleteRoot(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := e.fs.Fsck(ctx, false)
	if err != nil || !rep.OK() {
		t.Fatalf("fsck of the fixture: %v (%v)", rep, err)
	}
	return f
}

// copyDir copies the closed data directory from to a new one.
func copyDir(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	if out, err := exec.Command("cp", "-a", from+"/.", to).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	return to
}

// pcKill is one kill point of TestCrash/PurgeKilled: the child runs mode
// and is killed when it prints the line pause (or, with pause empty, after
// delay from its "start").
type pcKill struct {
	mode  string // purge, policy, delete
	at    int    // the purge's batch the child stops after (0: none)
	pause string // the line the parent kills on
	delay time.Duration
}

// purgeCrashSafety kills the process at many points of the purge of a
// big deleted root (between its transactions, in the middle of them, after
// its last one), of the policy job's purge, and of the deletion of a root
// with plain and staged uploads in flight into it; each time writes go on
// into another root of the same organization. After each restart fsck
// must be clean, the purge must finish when run again, the tallies must
// end at what the live roots hold, and keep's files must be whole.
func purgeCrashSafety(t *testing.T) {
	// 600 files are some dozen purge transactions, past every kill
	// point after one; BERTH_PURGE_CRASH_FILES=2400 is how the row was
	// first run (about 130 s on two cores, where 600 take some 55).
	bigFiles := 600
	if testing.Short() {
		bigFiles = 300
	}
	if n, err := strconv.Atoi(os.Getenv("BERTH_PURGE_CRASH_FILES")); err == nil {
		bigFiles = n
	}
	began := time.Now()
	f := buildPurgeFixture(t, bigFiles)
	t.Logf("fixture of %d files built in %v", bigFiles, time.Since(began))
	var kills []pcKill
	for _, mode := range []string{"purge", "policy"} {
		for _, at := range []int{1, 2, 3, 5, 8} {
			kills = append(kills, pcKill{mode: mode, at: at, pause: "paused"})
		}
		kills = append(kills, pcKill{mode: mode, pause: "big purged"}, pcKill{mode: mode, pause: "finished"})
		for _, d := range []time.Duration{0, 3, 10, 30, 60, 120, 250, 500} {
			kills = append(kills, pcKill{mode: mode, delay: d * time.Millisecond})
		}
	}
	for _, d := range []time.Duration{0, 2, 5, 10, 21, 40, 81, 150, 301, 600} {
		kills = append(kills, pcKill{mode: "delete", delay: d * time.Millisecond})
	}
	kills = append(kills, pcKill{mode: "delete", pause: "deleted"}, pcKill{mode: "delete", pause: "finished"})
	var mu sync.Mutex
	reached := map[string]int{}
	for _, k := range kills {
		name := fmt.Sprintf("%s/at%d/%s/%v", k.mode, k.at, strings.ReplaceAll(k.pause, " ", "_"), k.delay)
		t.Run(name, func(t *testing.T) {
			st := runPurgeKill(t, f, k)
			mu.Lock()
			reached[k.mode+": "+st]++
			mu.Unlock()
		})
	}
	t.Logf("%d kill points; states the kills left: %v", len(kills), reached)
}

// runPurgeKill runs one kill point on a copy of f and checks the
// restarted store; it returns the state the kill left, for the log.
func runPurgeKill(t *testing.T, f pcFixture, k pcKill) string {
	dir := copyDir(t, f.dir)
	cmd, out := startChild(t, "TestPurgeCrashChild", "BERTH_PURGE_CRASH_DIR="+dir, "BERTH_PURGE_CRASH_MODE="+k.mode,
		"BERTH_PURGE_CRASH_AT="+strconv.Itoa(k.at), "BERTH_PURGE_CRASH_PAUSE="+k.pause, fmt.Sprintf("BERTH_PURGE_CRASH_ROOTS=%d %d %d %d", f.keep.ID, f.victim.ID, f.big.ID, f.small.ID))
	timer := time.AfterFunc(120*time.Second, func() { cmd.Process.Kill() })
	defer timer.Stop()
	written := f.files
	sc := bufio.NewScanner(out)
	var killed bool
	kill := func() {
		if !killed {
			cmd.Process.Signal(syscall.SIGKILL)
			killed = true
		}
	}
	var seen []string
	var staged []uint64 // uploads into victim
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "staged "):
			var id uint64
			fmt.Sscanf(line, "staged %d", &id)
			staged = append(staged, id)
		case strings.HasPrefix(line, "wrote "):
			var w pcFile
			fmt.Sscanf(line, "wrote %d %d %d %d", &w.root, &w.id, &w.seed, &w.size)
			written = append(written, w)
		case line == "start" && k.pause == "":
			time.AfterFunc(k.delay, func() { cmd.Process.Signal(syscall.SIGKILL) })
		case line == k.pause || line == "finished":
			kill()
		case strings.HasPrefix(line, "--- FAIL") || strings.Contains(line, "_test.go:"):
			t.Errorf("child: %s", line)
		}
		seen = append(seen, line)
	}
	kill()
	cmd.Wait()
	if k.pause != "" && !slicesContains(seen, k.pause) {
		t.Fatalf("the child never printed %q (it printed %q)", k.pause, lastLines(seen, 5))
	}

	e := openEnv(t, dir)
	defer e.close()
	state := "big not purged"
	if u, err := e.fs.TallyUsage(ctx, pcBigOwner); err == nil && u.DelFileCount == 0 {
		state = "big purged"
	} else if a, err := e.fs.Audit(ctx, f.big.ID); err == nil && a.FileCount+a.DelFileCount < int64(bigFilesOf(t, e, f)) {
		state = "big half purged"
	}
	_, victimErr := e.fs.Root(ctx, f.victim.ID)
	if errors.Is(victimErr, vfs.ErrRootDeleted) {
		state += ", victim deleted"
	}
	fsckClean(t, e, "after the restart")
	// The uploads' clients end them (tus DELETE), before the purge runs
	// again or after it, as the kill point's parity says.
	endUploads := func(when string) {
		for _, id := range staged {
			if err := e.fs.Terminate(ctx, id); err != nil && !errors.Is(err, vfs.ErrNotExist) {
				t.Errorf("ending upload %d %s: %v", id, when, err)
			}
		}
		fsckClean(t, e, "after the uploads ended "+when)
	}
	early := k.delay/time.Millisecond%2 == 0
	if early {
		endUploads("before the purge")
	}
	if _, err := e.fs.PurgeDeleted(ctx, time.Now().Add(time.Hour)); err != nil {
		t.Fatalf("the purge run again: %v", err)
	}
	fsckClean(t, e, "after the purge ran again")
	if !early {
		endUploads("after the purge")
	}
	// A purged root's ledger went with it, and an upload ended after
	// does not bring it back.
	for _, r := range []vfs.Root{f.big, f.small, f.victim} {
		if _, err := e.fs.Root(ctx, r.ID); !errors.Is(err, vfs.ErrRootDeleted) {
			continue
		}
		if n, err := e.fs.LedgerShards(ctx, r.ID); err != nil || n != 0 {
			t.Errorf("purged root %s keeps %d usage records (%v)", r.Name, n, err)
		}
	}
	if n, err := e.fs.IntentParts(ctx); err != nil || n != 0 {
		t.Errorf("%d intent parts left (%v)", n, err)
	}
	for _, r := range []vfs.Root{f.big, f.small} {
		if a, err := e.fs.Audit(ctx, r.ID); err != nil || a != (vfs.Usage{RootCount: a.RootCount}) {
			t.Errorf("root %s after its purge: %+v (%v)", r.Name, a, err)
		}
	}
	for _, tally := range []uint64{pcBigOwner, pcSmallOwner} {
		if u, err := e.fs.TallyUsage(ctx, tally); err != nil || u != (vfs.Usage{}) {
			t.Errorf("tally %d of purged roots only: %+v (%v)", tally, u, err)
		}
	}
	// The tallies end at what the live roots hold.
	live := []vfs.Root{f.keep}
	if _, err := e.fs.Root(ctx, f.victim.ID); err == nil {
		live = append(live, f.victim)
	}
	tallyLive(t, e, live)
	// Nothing of the other roots is lost.
	for _, w := range written {
		e.root = vfs.Root{ID: w.root}
		if got := e.read(t, w.id); !bytes.Equal(got, randBytes(w.seed, w.size)) {
			t.Errorf("file %d of root %d differs after the crash", w.id, w.root)
		}
	}
	return state
}

func bigFilesOf(t *testing.T, e *env, f pcFixture) int {
	t.Helper()
	u, err := e.fs.TallyUsage(ctx, pcBigOwner)
	if err != nil {
		t.Fatal(err)
	}
	return int(u.DelFileCount)
}

func fsckClean(t *testing.T, e *env, when string) {
	t.Helper()
	rep, err := e.fs.Fsck(ctx, false)
	if err != nil || !rep.OK() {
		t.Fatalf("fsck %s: %v, bad usage %v, bad tallies %v (%v)", when, rep, rep.BadUsage, rep.BadTallies, err)
	}
}

func addPublic(sum *vfs.Usage, u vfs.Usage) {
	sum.FileCount += u.FileCount
	sum.HeadSize += u.HeadSize
	sum.RevisionCount += u.RevisionCount
	sum.RevisionSize += u.RevisionSize
	sum.DelFileCount += u.DelFileCount
	sum.DelRevisionCount += u.DelRevisionCount
	sum.DeletedSize += u.DeletedSize
	sum.FolderCount += u.FolderCount
	sum.PhysicalSize += u.PhysicalSize
	sum.RootCount += u.RootCount
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func lastLines(s []string, n int) []string { return s[max(len(s)-n, 0):] }

// TestPurgeCrashChild is the child of TestCrash/PurgeKilled, run in its
// own process on a copy of the fixture: it purges the deleted roots
// (PurgeDeleted, or PurgeDeletedIn as the policy job does), or deletes
// victim with uploads in flight into it and then purges, while it writes
// into keep, another root of the same organization; it prints what it
// wrote and where it is, to be killed there.
func TestPurgeCrashChild(t *testing.T) {
	dir, mode := os.Getenv("BERTH_PURGE_CRASH_DIR"), os.Getenv("BERTH_PURGE_CRASH_MODE")
	if dir == "" {
		t.Skip("only run as the child of TestCrash/PurgeKilled")
	}
	at, _ := strconv.Atoi(os.Getenv("BERTH_PURGE_CRASH_AT"))
	pause := os.Getenv("BERTH_PURGE_CRASH_PAUSE")
	var keep, victim, big, small uint64
	fmt.Sscanf(os.Getenv("BERTH_PURGE_CRASH_ROOTS"), "%d %d %d %d", &keep, &victim, &big, &small)
	var mu sync.Mutex
	println := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	var e *env
	batches := 0
	bigPurged := false
	// Transactions of at most 64 keys: a purge of big takes some fifty.
	opts := vfs.WithPurgeHook(vfs.WithRefBatch(vfs.Options{}, 64), func() {
		batches++
		if batches == at {
			println("paused")
			select {}
		}
		// The first pause after big's last transaction: between it and
		// the next.
		if pause != "big purged" || e == nil || bigPurged {
			return
		}
		if u, err := e.fs.TallyUsage(context.Background(), pcBigOwner); err == nil && u == (vfs.Usage{}) {
			bigPurged = true
			println("big purged")
			select {}
		}
	})
	e = openEnvWith(t, dir, opts)
	keepRoot, err := e.fs.Root(ctx, keep)
	if err != nil {
		t.Fatal(err)
	}
	// Writes into another root of the organization, all along.
	stop := make(chan struct{})
	go func() {
		for i := 0; i < 400; i++ {
			select {
			case <-stop:
				return
			default:
			}
			seed, size := uint64(70000+i), 17<<10+i*97
			n, err := e.fs.WriteFile(ctx, keep, keepRoot.FolderID, fmt.Sprintf("w%d", i), bytes.NewReader(randBytes(seed, size)), vfs.WriteOptions{})
			if err != nil {
				println("write error %v", err)
				return
			}
			println("wrote %d %d %d %d", keep, n.ID, seed, size)
		}
	}()
	switch mode {
	case "purge":
		println("start")
		if _, err := e.fs.PurgeDeleted(ctx, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	case "policy":
		cut := time.Now().Add(time.Hour)
		println("start")
		if _, err := e.fs.PurgeDeletedIn(ctx, map[uint64]time.Time{keep: cut, victim: cut, big: cut, small: cut}, 0); err != nil {
			t.Fatal(err)
		}
	case "delete":
		vr, err := e.fs.Root(ctx, victim)
		if err != nil {
			t.Fatal(err)
		}
		// A staged upload with a part stored, one being appended to,
		// one just staged, and a plain upload, all into victim.
		up, err := e.fs.Stage(ctx, victim, vr.FolderID, "staged", vfs.StageOptions{Length: 4 << 20, Owner: "u1"}, vfs.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.fs.Append(ctx, up.ID, 0, bytes.NewReader(randBytes(1, 1<<20)), vfs.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
		up2, err := e.fs.Stage(ctx, victim, vr.FolderID, "staged2", vfs.StageOptions{Length: 2 << 20, Owner: "u2"}, vfs.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		println("staged %d", up.ID)
		println("staged %d", up2.ID)
		var wg sync.WaitGroup
		wg.Add(3)
		go func() {
			defer wg.Done()
			_, err := e.fs.Append(ctx, up.ID, 1<<20, &slowReader{r: bytes.NewReader(randBytes(2, 3<<20))}, vfs.AppendOptions{})
			println("append: %v", err)
		}()
		go func() {
			defer wg.Done()
			_, err := e.fs.WriteFile(ctx, victim, vr.FolderID, "plain", &slowReader{r: bytes.NewReader(randBytes(3, 3<<20))}, vfs.WriteOptions{})
			println("plain: %v", err)
		}()
		go func() {
			defer wg.Done()
			// Small writes that commit all along.
			for i := range 200 {
				if _, err := e.fs.WriteFile(ctx, victim, vr.FolderID, fmt.Sprintf("v%d", i), bytes.NewReader(randBytes(uint64(i), 20<<10)), vfs.WriteOptions{}); err != nil {
					println("victim write: %v", err)
					return
				}
			}
		}()
		time.Sleep(20 * time.Millisecond)
		println("start")
		if err := e.fs.DeleteRoot(ctx, victim); err != nil {
			t.Fatal(err)
		}
		println("deleted")
		wg.Wait()
		if _, err := e.fs.PurgeDeleted(ctx, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("mode %q", mode)
	}
	close(stop)
	println("finished")
	select {}
}

// TestPurgeAlongsideWrites: two purges of the deleted roots big and small
// run at once while writes, overwrites, deletions, purges of items,
// properties and a staged upload go on in keep and victim, the other
// roots of their organization. Afterwards fsck is clean, the tallies are
// what the live roots hold, and the deleted roots' owners' tallies are
// empty: no change of a live root is lost in, or doubled by, the
// purges' last transactions, which take a deleted root out of the tallies
// every root of the organization writes.
func TestPurgeAlongsideWrites(t *testing.T) {
	f := buildPurgeFixture(t, 400)
	e := openEnvWith(t, f.dir, vfs.WithRefBatch(vfs.Options{}, 64))
	defer e.close()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w, r := range []vfs.Root{f.keep, f.victim, f.keep} {
		wg.Go(func() {
			for i := range 60 {
				name := fmt.Sprintf("c%d-%d", w, i%7)
				n, err := e.fs.WriteFile(ctx, r.ID, r.FolderID, name, bytes.NewReader(randBytes(uint64(w*1000+i), 17<<10+i)), vfs.WriteOptions{})
				if err != nil {
					errs <- err
					return
				}
				switch i % 5 {
				case 1:
					err = e.fs.PatchProps(ctx, r.ID, n.ID, map[string][]byte{"p": bytes.Repeat([]byte("x"), i)}, nil, vfs.WriteOptions{})
				case 3:
					if err = e.fs.Delete(ctx, r.ID, n.ID, vfs.WriteOptions{}); err == nil && i%2 == 0 {
						err = e.fs.Purge(ctx, r.ID, n.ID)
					}
				}
				if err != nil && !errors.Is(err, vfs.ErrNotExist) {
					errs <- err
					return
				}
			}
			up, err := e.fs.Stage(ctx, r.ID, r.FolderID, fmt.Sprintf("up%d", w), vfs.StageOptions{Length: 40 << 10, Owner: "u"}, vfs.WriteOptions{})
			if err == nil {
				_, err = e.fs.Append(ctx, up.ID, 0, bytes.NewReader(randBytes(7, 40<<10)), vfs.AppendOptions{})
			}
			if err == nil {
				_, err = e.fs.Finish(ctx, up.ID, vfs.WriteOptions{})
			}
			if err != nil {
				errs <- err
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			if _, err := e.fs.PurgeDeleted(ctx, time.Now().Add(time.Hour)); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	fsckClean(t, e, "after the purges")
	tallyLive(t, e, []vfs.Root{f.keep, f.victim})
	for _, tally := range []uint64{pcBigOwner, pcSmallOwner} {
		if u, err := e.fs.TallyUsage(ctx, tally); err != nil || u != (vfs.Usage{}) {
			t.Errorf("tally %d of purged roots only: %+v (%v)", tally, u, err)
		}
	}
}

// tallyLive checks that the organization's, its parent's and keep's
// owner's tallies hold what the live roots live hold, no more.
func tallyLive(t *testing.T, e *env, live []vfs.Root) {
	t.Helper()
	var want vfs.Usage
	for _, r := range live {
		u, err := e.fs.Usage(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		addPublic(&want, u)
	}
	for _, tally := range []uint64{pcOrg, pcParent, pcKeepOwner} {
		if got, err := e.fs.TallyUsage(ctx, tally); err != nil || got != want {
			t.Errorf("tally %d: %+v, want the live roots' %+v (%v)", tally, got, want, err)
		}
	}
}
