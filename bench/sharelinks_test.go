package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"berth/berthtest"
	"berth/rest"
	"berth/share"
	"berth/vfs"
	"berth/web"
)

// Issue 13's targets for share links.
const (
	anonRatioTarget  = 0.95                  // anonymous link download / authenticated download
	folderPageTarget = 50 * time.Millisecond // the web page of a folder link of 10,000 entries
)

// BenchmarkShareLinks measures issue 13's two targets in one run, against
// one real berth (Badger, the disk chunk store, vfs, accounts, share,
// rest.New behind httptest's TLS server, and web.New):
//
//   - download: a 1 GiB file (written through vfs) downloaded by its
//     owner, GET /api/2/files/<root>/<id>/download with a token, and
//     anonymously through a file link, GET /api/2/sharelinks/<hash>/download,
//     alternately, two rounds of each; the best of each is compared, so a
//     burst of other work on the machine hurts neither side alone;
//   - folder-page: GET /s/<hash> of a folder link of 10,000 files (the
//     first page of web.PageSize entries), served by the web handler into
//     a recorder, so the figure is server time without the network.
//
// The parent logs each figure beside its target.
func BenchmarkShareLinks(b *testing.B) {
	ctx := context.Background()
	st := berthtest.New(b, berthtest.Options{})
	_, root, token := st.AddPerson(b, "bench", "correct horse battery")
	shares := share.New(share.Options{FS: st.FS, Accounts: st.Accounts})
	srv := httptest.NewUnstartedServer(rest.New(rest.Options{FS: st.FS, Accounts: st.Accounts, Share: shares}))
	srv.StartTLS()
	b.Cleanup(srv.Close)
	s := &berth{fs: st.FS, srv: srv, client: srv.Client(), root: root, token: token}
	pages := web.New(web.Options{FS: st.FS, Accounts: st.Accounts, Share: shares})

	// link shares item (a file, or a folder when dir) and returns its hash.
	link := func(b *testing.B, id uint64, dir bool) string {
		b.Helper()
		path := fmt.Sprintf("/api/2/files/%d/%d/share", root.ID, id)
		if dir {
			path = fmt.Sprintf("/api/2/files/%d/folder/%d/share", root.ID, id)
		}
		resp := s.do(b, http.MethodPost, path, strings.NewReader(url.Values{}.Encode()), "application/x-www-form-urlencoded")
		defer resp.Body.Close()
		var l struct {
			Hash string `json:"hash"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
			b.Fatal(err)
		}
		return l.Hash
	}

	var authRate, anonRate float64
	var folderPage, folderPageMax time.Duration
	b.Run("download", func(b *testing.B) {
		n, err := st.FS.WriteFile(ctx, root.ID, root.FolderID, "big.bin", newGen(13, gib), vfs.WriteOptions{})
		if err != nil {
			b.Fatal(err)
		}
		hash := link(b, n.ID, false)
		authPath := fmt.Sprintf("/api/2/files/%d/%d/download", root.ID, n.ID)
		anonURL := srv.URL + "/api/2/sharelinks/" + hash + "/download"
		b.ResetTimer()
		for range b.N {
			for round := 0; round < 2; round++ {
				start := time.Now()
				if got := s.get(b, authPath); got != gib {
					b.Fatalf("authenticated download: %d bytes", got)
				}
				authRate = max(authRate, gib/time.Since(start).Seconds()/1e6)
				start = time.Now()
				resp, err := s.client.Get(anonURL)
				if err != nil {
					b.Fatal(err)
				}
				got, err := drain(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK || got != gib {
					b.Fatalf("anonymous download: %d, %d bytes, %v", resp.StatusCode, got, err)
				}
				anonRate = max(anonRate, gib/time.Since(start).Seconds()/1e6)
			}
		}
	})
	b.Run("folder-page", func(b *testing.B) {
		dir, err := st.FS.Mkdir(ctx, root.ID, root.FolderID, "big folder", vfs.WriteOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for i := range 10_000 {
			if _, err := st.FS.WriteFile(ctx, root.ID, dir.ID, fmt.Sprintf("file %05d.txt", i), strings.NewReader("x"), vfs.WriteOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		hash := link(b, dir.ID, true)
		const reps = 20
		b.ResetTimer()
		for range b.N {
			var total time.Duration
			for range reps {
				w := httptest.NewRecorder()
				start := time.Now()
				pages.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/s/"+hash, nil))
				d := time.Since(start)
				if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "file 00000.txt") {
					b.Fatalf("GET /s/%s: %d %.300s", hash, w.Code, w.Body.String())
				}
				total += d
				folderPageMax = max(folderPageMax, d)
			}
			folderPage = total / reps
		}
	})
	if authRate > 0 && anonRate > 0 {
		b.Logf("download: authenticated %.0f MB/s, anonymous through a link %.0f MB/s; ratio %.2f, target at least %.2f",
			authRate, anonRate, anonRate/authRate, anonRatioTarget)
	}
	if folderPage > 0 {
		b.Logf("folder-page (10,000 entries, first page): %v per GET (slowest %v); target under %v (%.2f of it)",
			folderPage.Round(10*time.Microsecond), folderPageMax.Round(10*time.Microsecond), folderPageTarget, float64(folderPage)/float64(folderPageTarget))
	}
}
