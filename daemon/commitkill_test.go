package daemon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
)

// TestKillRightAfterSmallWrites checks issue 15's durability claim for
// group commit: many clients write small files and folders at once
// (WebDAV MKCOL, PUT and MOVE, REST uploads), their commits share fsync
// rounds, and the process is killed with SIGKILL by the client goroutine
// that has just read an answer, with the other requests in flight. After a
// restart over the same data directory, every write that was answered is
// there byte for byte; a write in flight at the kill is there whole or
// not at all; nothing the clients did not write is visible; fsck --verify
// finds nothing wrong. A kill leaves the page cache to the kernel, so
// this proves the answers wait for commits, not for fsyncs: the fsyncs
// themselves are kv/badger's groupSync tests' and the vfs crash tests'.
func TestKillRightAfterSmallWrites(t *testing.T) {
	bin, data, p, lc := runningDaemon(t)

	const (
		cyclers = 6   // MKCOL d, PUT d/f.bin, MOVE d to d-m, again
		flat    = 4   // PUT or REST upload of a file into the root
		acks    = 300 // answers before the kill
	)
	type step struct{ mkcol, put, move, moveTried bool }
	type flatFile struct {
		name     string
		seed     uint64
		size     int
		answered bool
	}
	cycles := make([][]step, cyclers)
	flats := make([][]flatFile, flat)
	var answered atomic.Int64
	killed := make(chan struct{})
	var killOnce sync.Once
	// ack counts an answer and kills the daemon at once when it is the
	// acks-th: the answer has reached the client, nothing more.
	ack := func() {
		if answered.Add(1) == acks {
			killOnce.Do(func() { p.kill(t); close(killed) })
		}
	}
	gone := func() bool {
		select {
		case <-killed:
			return true
		default:
			return false
		}
	}
	body := func(w, i int) []byte { return content(uint64(1_000_000+w*10_000+i), 4096) }
	var wg sync.WaitGroup
	for w := range cyclers {
		wg.Go(func() {
			for i := 0; !gone(); i++ {
				dir := fmt.Sprintf("c%d-%d", w, i)
				cycles[w] = append(cycles[w], step{})
				s := &cycles[w][i]
				st, _, err := lc.dav("MKCOL", dir+"/", nil)
				if err != nil {
					return
				}
				if st != http.StatusCreated {
					t.Errorf("MKCOL %s: %d", dir, st)
					return
				}
				s.mkcol = true
				ack()
				st, _, err = lc.dav(http.MethodPut, dir+"/f.bin", bytes.NewReader(body(w, i)))
				if err != nil {
					return
				}
				if st != http.StatusCreated {
					t.Errorf("PUT %s/f.bin: %d", dir, st)
					return
				}
				s.put = true
				ack()
				s.moveTried = true
				st, _, err = lc.dav("MOVE", dir+"/", nil, "Destination", lc.base+"/webdav/admin/"+dir+"-m/", "Overwrite", "F")
				if err != nil {
					return
				}
				if st != http.StatusCreated {
					t.Errorf("MOVE %s: %d", dir, st)
					return
				}
				s.move = true
				ack()
			}
		})
	}
	// Sizes around the inline limit (vfs.InlineMax, 16 KiB): the larger
	// ones go through the chunk store and its syncs.
	sizes := []int{4096, 1, 1000, 4096, 16 << 10, 16<<10 + 1, 40 << 10}
	for w := range flat {
		wg.Go(func() {
			for i := 0; !gone(); i++ {
				f := flatFile{name: fmt.Sprintf("f%d-%d.bin", w, i), seed: uint64(w*10_000 + i), size: sizes[(w+i)%len(sizes)]}
				flats[w] = append(flats[w], f)
				st, err := lc.upload(f.name, content(f.seed, f.size), w%2 == 0)
				if err != nil {
					return
				}
				if st != http.StatusOK && st != http.StatusCreated {
					t.Errorf("upload %s: %d", f.name, st)
					return
				}
				flats[w][i].answered = true
				ack()
			}
		})
	}
	wg.Wait()
	if !gone() {
		t.Fatalf("the clients stopped after %d answers, before the kill", answered.Load())
	}

	p = startDaemon(t, bin, data)
	lc = newLCClient(t, p, data)
	visible := lc.topLevel()
	read := func(path string) (int, []byte) {
		st, b, err := lc.dav(http.MethodGet, path, nil)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return st, b
	}
	expected := map[string]bool{}
	var nAcked int
	for w, ss := range cycles {
		for i, s := range ss {
			dir := fmt.Sprintf("c%d-%d", w, i)
			expected[dir], expected[dir+"-m"] = true, true
			at := ""
			switch {
			case visible[dir] == "folder" && visible[dir+"-m"] == "folder":
				t.Errorf("%s is at both its names", dir)
			case visible[dir] == "folder":
				at = dir
			case visible[dir+"-m"] == "folder":
				at = dir + "-m"
			}
			switch {
			case s.mkcol && at == "":
				t.Errorf("folder %s was answered 201 and is gone", dir)
				continue
			case s.move && at != dir+"-m":
				t.Errorf("MOVE of %s was answered 201 and it is at %q", dir, at)
			case !s.moveTried && at == dir+"-m":
				t.Errorf("%s moved without a MOVE", dir)
			case at == "":
				continue
			}
			for _, b := range []bool{s.mkcol, s.put, s.move} {
				if b {
					nAcked++
				}
			}
			st, got := read(at + "/f.bin")
			switch {
			case st == http.StatusOK && !bytes.Equal(got, body(w, i)):
				t.Errorf("%s/f.bin holds %d bytes other than those sent", at, len(got))
			case st != http.StatusOK && s.put:
				t.Errorf("%s/f.bin was answered 201 and reads %d", at, st)
			case st != http.StatusOK && st != http.StatusNotFound:
				t.Errorf("%s/f.bin: %d", at, st)
			}
		}
	}
	for _, fs := range flats {
		for _, f := range fs {
			expected[f.name] = true
			kind, ok := visible[f.name]
			switch {
			case f.answered && !ok:
				t.Errorf("%s was answered and is gone", f.name)
			case !ok:
				continue
			case kind != "file":
				t.Errorf("%s is a %s", f.name, kind)
				continue
			}
			if f.answered {
				nAcked++
			}
			st, got := read(f.name)
			if st != http.StatusOK || !bytes.Equal(got, content(f.seed, f.size)) {
				t.Errorf("%s reads %d, %d bytes, not the %d sent", f.name, st, len(got), f.size)
			}
		}
	}
	for name := range visible {
		if !expected[name] {
			t.Errorf("unexpected item %s", name)
		}
	}
	t.Logf("%d answers before the kill; %d answered writes checked, %d items visible after the restart", answered.Load(), nAcked, len(visible))
	p.stop(t)
	fsck(t, bin, data)
}

// topLevel returns the live items of the root's top folder, name to type
// ("file" or "folder").
func (lc *lcClient) topLevel() map[string]string {
	lc.t.Helper()
	status, body := lc.do(http.MethodGet, fmt.Sprintf("/api/2/files/%d?include_children=true", lc.root), nil, "")
	var root struct {
		Children []struct {
			Path string `json:"path"`
			Type string `json:"type"`
		} `json:"children"`
	}
	if status != 200 || json.Unmarshal(body, &root) != nil {
		lc.t.Fatalf("listing: %d %s", status, body)
	}
	items := map[string]string{}
	for _, c := range root.Children {
		items[c.Path[1:]] = c.Type
	}
	return items
}
