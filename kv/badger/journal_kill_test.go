package badger

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"berth/kv"
)

// killChildEnv switches the test binary, run again by TestJournalKillLoop,
// into the child that writes until it is killed: the run's number, its
// seed, Options' MemTableSize and journalSlot, and the store's directory
// (which may hold commas), separated by commas.
const killChildEnv = "BERTH_JOURNAL_KILL_CHILD"

const (
	killTokens  = 8  // keys tok/0 .. tok/7
	killPerTok  = 10 // tokens each starts with
	killWorkers = 4
)

// TestJournalKillLoop kills a process writing to a store with SIGKILL at a
// random moment, again and again on the same directory, and opens the
// store after each kill (Open replays the journal). The child runs
// killWorkers goroutines of transactions whose writes belong together:
// a token moved between two shared keys (the total never changes), a
// pair set to one value (some with SetTTL, some by UpdateUnsynced), a key
// set while its twin is deleted, an id from NextID stored under a key. It
// reports each Update that returned nil on stdout. After each kill the
// parent checks that no transaction is torn, that every durable
// acknowledged write is there or was followed by a later one of its
// goroutine, and that NextID hands out no id stored before.
//
// "power cut" also gives Badger's files (not the journal's) back as a
// power cut could leave them: a copy made after the child's Open synced
// them, while the child wrote. Each page of the copy is one the page
// cache held at some time after that sync and before the kill, which the
// kernel may have written back, and nothing later. Badger syncs nothing
// of its own meanwhile but when a memtable flushes (a new table, the
// MANIFEST), and the journal syncs Badger's logs only at a checkpoint
// (a new epoch, then the checkpoint file): an iteration where either
// happened is not cut.
func TestJournalKillLoop(t *testing.T) {
	if env := os.Getenv(killChildEnv); env != "" {
		killChild(env)
		return
	}
	if testing.Short() {
		t.Skip("kills child processes for some seconds")
	}
	for _, tc := range []struct {
		name     string
		opts     Options
		powerCut bool
	}{
		{name: "kill"},
		// Memtables flush and compact, and slots fill and checkpoint,
		// while the child writes and while Open replays.
		{name: "kill, small memtables and slots", opts: Options{MemTableSize: 1 << 20, journalSlot: 256 << 10}},
		{name: "power cut", powerCut: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seed := time.Now().UnixNano()
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewPCG(uint64(seed), 0))
			k := &killState{dir: t.TempDir(), opts: tc.opts, durable: map[int]map[string]killAck{}}
			for run := 1; run <= 6; run++ {
				k.iterate(t, run, rng, tc.powerCut)
				if t.Failed() {
					return
				}
			}
		})
	}
}

// killAck is one acknowledged transaction of the child.
type killAck struct {
	worker int
	ord    uint64 // run<<32 | the worker's transaction number
	kind   string // move, pair, swap0, swap1, count, id, init
	synced bool
	id     uint64
}

// killState is what the parent knows across the child's runs.
type killState struct {
	dir  string
	opts Options
	// durable: by worker, by kind of transaction, the last acknowledged
	// one that is durable (synced, or unsynced with a synced one of the
	// same worker after it).
	durable map[int]map[string]killAck
	inited  bool
	// durableIDs: the ids of durable acknowledgements, with the
	// transaction that stored each.
	durableIDs map[uint64]uint64
}

func (k *killState) iterate(t *testing.T, run int, rng *rand.Rand, powerCut bool) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestJournalKillLoop$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d,%d,%d,%d,%s", killChildEnv, run, rng.Uint64(), k.opts.MemTableSize, k.opts.journalSlot, k.dir))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		r := bufio.NewReader(out)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return // a line the kill cut is no acknowledgement
			}
			lines <- strings.TrimSuffix(line, "\n")
		}
	}()
	// Wait for the child's Open: a kill before it tests only Open.
	select {
	case l, ok := <-lines:
		if !ok || l != "open" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("run %d: child said %q before opening; stderr:\n%s", run, l, stderr.String())
		}
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("run %d: child did not open; stderr:\n%s", run, stderr.String())
	}
	var acks []killAck
	collect := func() {
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					return
				}
				acks = append(acks, parseKillAck(t, l))
			default:
				return
			}
		}
	}
	snap, before := "", ""
	if powerCut {
		snap = filepath.Join(t.TempDir(), "badger")
		before = badgerSyncedState(t, k.dir)
		copyBadgerFiles(t, k.dir, snap)
	}
	deadline := time.After(time.Duration(100+rng.IntN(1400)) * time.Millisecond)
wait:
	for {
		select {
		case <-deadline:
			break wait
		case <-time.After(10 * time.Millisecond):
			collect()
		}
	}
	cmd.Process.Signal(syscall.SIGKILL) // it may have failed and exited
	for l := range lines {
		acks = append(acks, parseKillAck(t, l))
	}
	cmd.Wait()
	if strings.Contains(stderr.String(), "child: ") {
		t.Fatalf("run %d: the child failed:\n%s", run, stderr.String())
	}
	cut := ""
	if powerCut {
		if after := badgerSyncedState(t, k.dir); after != before {
			cut = ", no power cut: Badger synced files of its own meanwhile"
		} else {
			restoreBadgerFiles(t, snap, k.dir)
			cut = ", power cut"
		}
		os.RemoveAll(snap)
	}
	k.note(t, run, acks)
	t.Logf("run %d: %d acknowledged commits%s", run, len(acks), cut)
	k.check(t, run)
}

func parseKillAck(t *testing.T, l string) killAck {
	var a killAck
	var synced int
	if _, err := fmt.Sscanf(l, "ack %d %d %s %d %d", &a.worker, &a.ord, &a.kind, &synced, &a.id); err != nil {
		t.Fatalf("child said %q: %v", l, err)
	}
	a.synced = synced == 1
	return a
}

// note records the durable acknowledgements: each worker's transactions
// are reported in the order it ran them, so an unsynced one is durable
// once a synced one of the same worker followed it (its record is
// earlier in the journal).
func (k *killState) note(t *testing.T, run int, acks []killAck) {
	pending := map[int][]killAck{}
	for _, a := range acks {
		if a.kind == "init" {
			k.inited = true
			continue
		}
		if a.kind == "id" {
			if o, ok := k.durableIDs[a.id]; ok {
				t.Errorf("run %d: NextID handed out %d again, stored durably at %d", run, a.id, o)
			}
		}
		pending[a.worker] = append(pending[a.worker], a)
		if !a.synced {
			continue
		}
		if k.durable[a.worker] == nil {
			k.durable[a.worker] = map[string]killAck{}
		}
		for _, p := range pending[a.worker] {
			kind := p.kind
			if strings.HasPrefix(kind, "swap") {
				kind = "swap"
			}
			k.durable[a.worker][kind] = p
			if p.kind == "id" {
				if k.durableIDs == nil {
					k.durableIDs = map[uint64]uint64{}
				}
				k.durableIDs[p.id] = p.ord
			}
		}
		pending[a.worker] = nil
	}
}

func (k *killState) check(t *testing.T, run int) {
	ctx := context.Background()
	s := openDisk(t, k.dir, k.opts)
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	got := map[string]string{}
	err := s.View(ctx, func(tx kv.Txn) error {
		return tx.Scan(nil, nil, func(key, value []byte) error {
			got[string(key)] = string(value)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	ord := func(key string) (uint64, bool) {
		v, ok := got[key]
		if !ok {
			return 0, false
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Errorf("run %d: %s = %q", run, key, v)
		}
		return n, true
	}
	// Tokens: all there with the total, or none before the first init.
	sum, present := 0, 0
	for i := range killTokens {
		if v, ok := got[fmt.Sprintf("tok/%d", i)]; ok {
			n, _ := strconv.Atoi(v)
			sum += n
			present++
		}
	}
	if present != 0 || k.inited {
		if present != killTokens || sum != killTokens*killPerTok {
			t.Errorf("run %d: %d token keys, %d tokens, want %d and %d", run, present, sum, killTokens, killTokens*killPerTok)
		}
	}
	var maxID uint64
	for key, v := range got {
		if id, ok := strings.CutPrefix(key, "id/"); ok {
			n, err := strconv.ParseUint(id, 10, 64)
			if err != nil {
				t.Errorf("run %d: key %q", run, key)
			}
			maxID = max(maxID, n)
			if _, err := strconv.ParseUint(v, 10, 64); err != nil {
				t.Errorf("run %d: %s = %q", run, key, v)
			}
		}
	}
	for w := range killWorkers {
		d := k.durable[w]
		p := fmt.Sprintf("own/%d/", w)
		// Pair: equal, and no older than the last durable one.
		a, okA := ord(p + "pA")
		b, okB := ord(p + "pB")
		if okA != okB || a != b {
			t.Errorf("run %d: worker %d's pair torn: %q %q", run, w, got[p+"pA"], got[p+"pB"])
		}
		if want, ok := d["pair"]; ok && a < want.ord {
			t.Errorf("run %d: worker %d's pair at %d, acknowledged %d", run, w, a, want.ord)
		}
		// Swap: exactly one of the two once one swap committed.
		s0, ok0 := ord(p + "s0")
		s1, ok1 := ord(p + "s1")
		if ok0 && ok1 {
			t.Errorf("run %d: worker %d's swap torn: both set (%d, %d)", run, w, s0, s1)
		}
		if want, ok := d["swap"]; ok {
			if !ok0 && !ok1 {
				t.Errorf("run %d: worker %d's swap torn or lost: neither set, acknowledged %s at %d", run, w, want.kind, want.ord)
			} else if max(s0, s1) < want.ord {
				t.Errorf("run %d: worker %d's swap at %d, acknowledged %s at %d", run, w, max(s0, s1), want.kind, want.ord)
			}
		}
		// Count: one entry, the one cnt names, each commit a new key.
		var entries []string
		for key := range got {
			if strings.HasPrefix(key, p+"e/") {
				entries = append(entries, key)
			}
		}
		if cnt, ok := got[p+"cnt"]; !ok && len(entries) > 0 || ok && (len(entries) != 1 || entries[0] != p+"e/"+cnt) {
			t.Errorf("run %d: worker %d's count torn: cnt %q, entries %v", run, w, cnt, entries)
		} else if want, ok := d["count"]; ok {
			if len(entries) == 0 {
				t.Errorf("run %d: worker %d's count lost, acknowledged at %d", run, w, want.ord)
			} else if e, _ := ord(entries[0]); e < want.ord {
				t.Errorf("run %d: worker %d's count at %d, acknowledged %d", run, w, e, want.ord)
			}
		}
		// Move: the worker's mark, written with the move.
		if want, ok := d["move"]; ok {
			if m, _ := ord(p + "mv"); m < want.ord {
				t.Errorf("run %d: worker %d's move at %d, acknowledged %d", run, w, m, want.ord)
			}
		}
	}
	// Ids: every durable one is stored, by the transaction that took it.
	for id, o := range k.durableIDs {
		key := "id/" + strconv.FormatUint(id, 10)
		if v, ok := got[key]; !ok {
			t.Errorf("run %d: %s lost (acknowledged at %d)", run, key, o)
		} else if v != strconv.FormatUint(o, 10) {
			t.Errorf("run %d: %s = %s, acknowledged %d", run, key, v, o)
		}
	}
	id, err := s.NextID(ctx, "kill")
	if err != nil {
		t.Fatal(err)
	}
	if id <= maxID {
		t.Errorf("run %d: NextID handed out %d again (ids up to %d stored)", run, id, maxID)
	}
}

// badgerSyncedState names Badger's files, what it syncs of its own (its
// tables and MANIFEST, written at a memtable flush or compaction), and
// the journal's files' headers, which move when a checkpoint may sync
// Badger's logs.
func badgerSyncedState(t *testing.T, dir string) string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range ents {
		fmt.Fprintf(&b, "%s\n", e.Name())
		if strings.HasSuffix(e.Name(), ".sst") || e.Name() == "MANIFEST" {
			info, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%s %d %d\n", e.Name(), info.Size(), info.ModTime().UnixNano())
		}
	}
	// A checkpoint syncs Badger's logs: one starts when an epoch starts
	// in a slot (a new header), then rewrites the checkpoint file. Slots
	// of slotSize take some 10 times what a run writes, but see.
	names, _ := filepath.Glob(filepath.Join(dir, journalDir, "*"))
	for _, name := range names {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		head := make([]byte, 32)
		n, _ := io.ReadFull(f, head)
		f.Close()
		fmt.Fprintf(&b, "%s %x\n", filepath.Base(name), head[:n])
	}
	return b.String()
}

// badgerFiles names Badger's files in dir: all but the journal's and
// the lock.
func badgerFiles(t *testing.T, dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if !e.IsDir() && e.Name() != "LOCK" {
			names = append(names, e.Name())
		}
	}
	return names
}

// copyBadgerFiles copies Badger's files in dir into dst.
func copyBadgerFiles(t *testing.T, dir, dst string) {
	if err := os.MkdirAll(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range badgerFiles(t, dir) {
		if err := copyFile(filepath.Join(dir, name), filepath.Join(dst, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// restoreBadgerFiles puts Badger's files from snap in place of dir's.
func restoreBadgerFiles(t *testing.T, snap, dir string) {
	for _, name := range badgerFiles(t, dir) {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	copyBadgerFiles(t, snap, dir)
}

// killChild writes to the store until the parent kills it.
func killChild(env string) {
	parts := strings.SplitN(env, ",", 5)
	run, _ := strconv.ParseUint(parts[0], 10, 64)
	seed, _ := strconv.ParseUint(parts[1], 10, 64)
	mt, _ := strconv.ParseInt(parts[2], 10, 64)
	slot, _ := strconv.ParseInt(parts[3], 10, 64)
	dir := parts[4]
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	s, err := Open(Options{Dir: dir, MemTableSize: mt, journalSlot: slot})
	if err != nil {
		fail(err)
	}
	ctx := context.Background()
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		os.Stdout.WriteString(fmt.Sprintf(format, args...) + "\n")
	}
	// A synced commit each run, so that its first round, which starts
	// the run's epoch in a slot, is before "open" (see badgerSyncedState).
	err = s.Update(ctx, func(tx kv.Txn) error {
		if err := tx.Set([]byte("run"), []byte(strconv.FormatUint(run, 10))); err != nil {
			return err
		}
		if _, err := tx.Get([]byte("tok/0")); !errors.Is(err, kv.ErrNotFound) {
			return err
		}
		for i := range killTokens {
			if err := tx.Set([]byte(fmt.Sprintf("tok/%d", i)), []byte(strconv.Itoa(killPerTok))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		fail(err)
	}
	say("open")
	say("ack 0 0 init 1 0")
	for w := range killWorkers {
		go func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			p := fmt.Sprintf("own/%d/", w)
			for n := uint64(1); ; n++ {
				ord := run<<32 | n
				val := []byte(strconv.FormatUint(ord, 10))
				kind, synced, id := "", rng.IntN(4) != 0, uint64(0)
				var fn func(tx kv.Txn) error
				switch rng.IntN(5) {
				case 0:
					kind = "move"
					from, to := rng.IntN(killTokens), rng.IntN(killTokens)
					fn = func(tx kv.Txn) error {
						a, err := getInt(tx, fmt.Sprintf("tok/%d", from))
						if err != nil {
							return err
						}
						b, err := getInt(tx, fmt.Sprintf("tok/%d", to))
						if err != nil {
							return err
						}
						if from != to && a > 0 {
							a, b = a-1, b+1
						}
						if err := tx.Set([]byte(fmt.Sprintf("tok/%d", from)), []byte(strconv.Itoa(a))); err != nil {
							return err
						}
						if err := tx.Set([]byte(fmt.Sprintf("tok/%d", to)), []byte(strconv.Itoa(b))); err != nil {
							return err
						}
						return tx.Set([]byte(p+"mv"), val)
					}
				case 1:
					kind = "pair"
					ttl := rng.IntN(2) == 0
					fn = func(tx kv.Txn) error {
						for _, k := range []string{"pA", "pB"} {
							var err error
							if ttl {
								err = tx.SetTTL([]byte(p+k), val, time.Hour)
							} else {
								err = tx.Set([]byte(p+k), val)
							}
							if err != nil {
								return err
							}
						}
						return nil
					}
				case 2:
					x := rng.IntN(2)
					kind = fmt.Sprintf("swap%d", x)
					fn = func(tx kv.Txn) error {
						if err := tx.Set([]byte(fmt.Sprintf("%ss%d", p, x)), val); err != nil {
							return err
						}
						return tx.Delete([]byte(fmt.Sprintf("%ss%d", p, 1-x)))
					}
				case 3:
					kind = "count"
					fn = func(tx kv.Txn) error {
						c := 0
						if v, err := tx.Get([]byte(p + "cnt")); err == nil {
							c, _ = strconv.Atoi(string(v))
						} else if !errors.Is(err, kv.ErrNotFound) {
							return err
						}
						if err := tx.Set([]byte(p+"cnt"), []byte(strconv.Itoa(c+1))); err != nil {
							return err
						}
						if err := tx.Set([]byte(fmt.Sprintf("%se/%d", p, c+1)), val); err != nil {
							return err
						}
						return tx.Delete([]byte(fmt.Sprintf("%se/%d", p, c)))
					}
				default:
					kind = "id"
					fn = func(tx kv.Txn) error {
						var err error
						if id, err = s.NextID(ctx, "kill"); err != nil {
							return err
						}
						return tx.Set([]byte("id/"+strconv.FormatUint(id, 10)), val)
					}
				}
				if synced {
					err = s.Update(ctx, fn)
				} else {
					err = s.UpdateUnsynced(ctx, fn)
				}
				if errors.Is(err, kv.ErrConflict) {
					continue
				}
				if err != nil {
					fail(err)
				}
				say("ack %d %d %s %d %d", w, ord, kind, map[bool]int{true: 1}[synced], id)
			}
		}()
	}
	select {}
}

func getInt(tx kv.Txn, key string) (int, error) {
	v, err := tx.Get([]byte(key))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(string(v))
}
