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
