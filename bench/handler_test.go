package bench

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"berth/berthtest"
	"berth/rest"
	"berth/vfs"
	"berth/webdav"
)

// nullWriter is the least a ResponseWriter can be: a fresh header map per
// request, as net/http's, and writes that go nowhere.
type nullWriter struct {
	h    http.Header
	code int
	n    int
}

func (w *nullWriter) Header() http.Header  { return w.h }
func (w *nullWriter) WriteHeader(code int) { w.code = code }
func (w *nullWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	w.n += len(p)
	return len(p), nil
}

// BenchmarkGetHandler measures what a 4 KiB GET costs inside the handler,
// without TLS, sockets or net/http's request parsing, which every server
// pays alike: the bare handler of bench/webdav.sh's Go server (a Basic
// check and a write from memory) beside berth's REST download (Bearer)
// and WebDAV GET (Basic). The difference per op is what berth adds per
// request; allocs/op shows where the garbage comes from. It runs on one
// goroutine, so it is steady even on a shared machine.
func BenchmarkGetHandler(b *testing.B) {
	ctx := context.Background()
	const pass = "correct horse battery"
	st := berthtest.New(b, berthtest.Options{})
	_, root, token := st.AddPerson(b, "bench", pass)
	f, err := st.FS.WriteFile(ctx, root.ID, root.FolderID, "f00000.bin", newGen(7, 4096), vfs.WriteOptions{})
	if err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 4096)
	want := []byte("bench:" + pass)
	bare := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(u+":"+p), want) != 1 {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("ETag", `"davload"`)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	})
	api := rest.New(rest.Options{FS: st.FS, Accounts: st.Accounts})
	dav := webdav.New(webdav.Options{FS: st.FS, Accounts: st.Accounts})
	for _, c := range []struct {
		name string
		h    http.Handler
		url  string
		auth func(*http.Request)
	}{
		{"bare", bare, "/f00000.bin", func(r *http.Request) { r.SetBasicAuth("bench", pass) }},
		{"rest", api, fmt.Sprintf("/api/2/files/%d/%d/download", root.ID, f.ID),
			func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }},
		{"webdav", dav, "/webdav/bench/f00000.bin", func(r *http.Request) { r.SetBasicAuth("bench", pass) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			serve := func() {
				r, _ := http.NewRequest(http.MethodGet, "https://localhost"+c.url, nil)
				r.RemoteAddr = "127.0.0.1:40000"
				c.auth(r)
				w := &nullWriter{h: http.Header{}}
				c.h.ServeHTTP(w, r)
				if w.code != http.StatusOK || w.n != 4096 {
					b.Fatalf("GET %s: %d, %d bytes", c.url, w.code, w.n)
				}
			}
			serve() // the credential caches, as a running server has them
			b.ReportAllocs()
			c0 := cpuTime()
			for b.Loop() {
				serve()
			}
			// CPU per op: the wall time per op swings with the load of
			// a shared machine, the CPU spent much less.
			b.ReportMetric(float64((cpuTime()-c0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}
