package webdav_test

import (
	"bytes"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"berth/vfs"
)

// TestSmallPutsOneSyncPerRound: PUTs of small files, whose contents stay
// in their revision records (vfs.InlineMax), from 8 clients at once cost
// one fdatasync per sync round, of the metadata store's write-ahead log
// alone: the records stay out of Badger's value log, which would take a
// second fdatasync in every round (issue 15 item 3). Rounds are shared,
// so there is at most one fdatasync per PUT.
func TestSmallPutsOneSyncPerRound(t *testing.T) {
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
			if rounds == 0 || files != rounds {
				t.Errorf("%d fdatasyncs in %d sync rounds, want one a round", files, rounds)
			}
			if files > puts {
				t.Errorf("%d fdatasyncs for %d PUTs", files, puts)
			}
			if got, err := f.read("/c7-11.txt"); err != nil || !bytes.Equal(got, body) {
				t.Errorf("read back %d bytes, %v", len(got), err)
			}
		})
	}
}
