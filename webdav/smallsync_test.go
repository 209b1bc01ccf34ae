package webdav_test

import (
	"bytes"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"berth/vfs"
)

// TestSmallPutsShareSyncRounds: PUTs of small files, whose contents stay
// in their revision records (vfs.InlineMax), from 8 clients at once share
// sync rounds: a round fdatasyncs at most the metadata store's write-ahead
// log and its value log (where the records go, see kv/badger's
// valueThreshold for why), and far fewer rounds run than PUTs.
func TestSmallPutsShareSyncRounds(t *testing.T) {
	for _, size := range []int{4 << 10, vfs.InlineMax} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			f := newFixture(t)
			const clients, each = 8, 12
			body := bytes.Repeat([]byte("s"), size)
			before := f.stack.DB.SyncStats()
			var wg sync.WaitGroup
			for c := range clients {
				wg.Go(func() {
					for i := range each {
						req, err := http.NewRequest("PUT", f.url(fmt.Sprintf("/c%d-%d.txt", c, i)), bytes.NewReader(body))
						if err != nil {
							t.Error(err)
							return
						}
						req.SetBasicAuth("alice", password)
						resp, err := f.client.Do(req)
						if err != nil {
							t.Error(err)
							return
						}
						resp.Body.Close()
						if resp.StatusCode != http.StatusCreated {
							t.Errorf("PUT: status %d", resp.StatusCode)
						}
					}
				})
			}
			wg.Wait()
			after := f.stack.DB.SyncStats()
			puts := uint64(clients * each)
			files, rounds := after.Files-before.Files, after.Rounds-before.Rounds
			t.Logf("%d PUTs of %d bytes: %d commits, %d rounds, %d fdatasyncs", puts, size, after.Commits-before.Commits, rounds, files)
			if rounds == 0 || files > 2*rounds {
				t.Errorf("%d fdatasyncs in %d sync rounds, want at most two a round", files, rounds)
			}
			if rounds >= puts {
				t.Errorf("%d sync rounds for %d PUTs from %d clients: rounds are not shared", rounds, puts, clients)
			}
			if got, err := f.read("/c7-11.txt"); err != nil || !bytes.Equal(got, body) {
				t.Errorf("read back %d bytes, %v", len(got), err)
			}
		})
	}
}

// TestCycleSyncs: the requests of bench/webdav.sh's cycle from a lone
// client, each one write transaction and one sync round of its own (no
// round waits for other writers), with the round fdatasyncing only what
// the request wrote to: the write-ahead log for a folder's MKCOL, MOVE
// and DELETE (everything below a folder moves or goes in that one
// transaction), that log and the value log for a small file's PUT (its
// record holds the contents; the chunk store syncs nothing). Without
// conditions none of them reads in a transaction of its own: their
// commits look their paths up (vfs.MkdirAt, WriteAt, MoveAt, DeleteAt).
// The login and the session's roots are remembered across file writes.
func TestCycleSyncs(t *testing.T) {
	f := newFixture(t)
	f.do("PROPFIND", "/", nil, "Depth", "0") // the login, remembered
	body := bytes.Repeat([]byte("c"), 4096)
	for i := range 3 {
		dir := fmt.Sprintf("/d%d/", i)
		moved := fmt.Sprintf("/d%d-moved/", i)
		for _, r := range []struct {
			method, path string
			body         []byte
			hdr          []string
			status       int
			fsyncs       uint64 // at most, a round
			views        uint64 // at most
		}{
			{"MKCOL", dir, nil, nil, http.StatusCreated, 1, 0},
			{"PUT", dir + "f.bin", body, nil, http.StatusCreated, 2, 0},
			{"MOVE", dir, nil, []string{"Destination", f.url(moved), "Overwrite", "F"}, http.StatusCreated, 1, 0},
			{"DELETE", moved, nil, nil, http.StatusNoContent, 1, 0},
		} {
			before, reads := f.stack.DB.SyncStats(), f.stack.DB.TxnStats()
			st, _, text := f.do(r.method, r.path, bytes.NewReader(r.body), r.hdr...)
			want(t, r.method, st, r.status, text)
			after, readsAfter := f.stack.DB.SyncStats(), f.stack.DB.TxnStats()
			commits, rounds, files := after.Commits-before.Commits, after.Rounds-before.Rounds, after.Files-before.Files
			// A commit of the vfs node's liveness lease (every 10 s)
			// may fall in too: it is a commit and a round more.
			if commits < 1 || commits > 2 || rounds < 1 || files > r.fsyncs*rounds {
				t.Errorf("%s %s: %d commits, %d rounds, %d fdatasyncs; want 1 commit in a round of its own, at most %d fdatasyncs a round",
					r.method, r.path, commits, rounds, files, r.fsyncs)
			}
			if i > 0 {
				if views := readsAfter.Views - reads.Views; views > r.views {
					t.Errorf("%s %s: %d read transactions, want at most %d", r.method, r.path, views, r.views)
				}
			}
		}
	}
}
