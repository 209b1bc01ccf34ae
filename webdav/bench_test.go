package webdav_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkPropfindDepth1 lists a folder of 10,000 files with PROPFIND
// Depth 1 (allprop, no body), over TLS, with the Basic credential cache warm.
func BenchmarkPropfindDepth1(b *testing.B) {
	f := newFixture(b)
	ctx := context.Background()
	dir, err := f.fs.Mkdir(ctx, f.root.ID, f.root.FolderID, "big", f.opts())
	if err != nil {
		b.Fatal(err)
	}
	for i := range 10000 {
		if _, err := f.fs.WriteFile(ctx, f.root.ID, dir.ID, "file-"+strconv.Itoa(i)+".txt", strings.NewReader("x"), f.opts()); err != nil {
			b.Fatal(err)
		}
	}
	props := `<D:propfind xmlns:D="DAV:"><D:prop><D:resourcetype/><D:getcontentlength/><D:getlastmodified/><D:getetag/></D:prop></D:propfind>`
	for _, c := range []struct{ name, body string }{{"allprop", ""}, {"prop", props}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				req, _ := http.NewRequest("PROPFIND", f.url("/big/"), strings.NewReader(c.body))
				req.SetBasicAuth("alice", password)
				req.Header.Set("Depth", "1")
				resp, err := f.client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusMultiStatus {
					b.Fatalf("status %d", resp.StatusCode)
				}
				b.SetBytes(n)
			}
		})
	}
}
