package webdav_test

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"berth/berthtest"
	"berth/webdav"
)

// TestGetFailsLoudly: a GET whose contents are lost under the metadata (the
// chunk files removed) must reach the client as a broken transfer, never
// as a short file with status 200, and be logged and counted
// (berth_http_aborted_streams_total) as REST downloads are. Before
// httpserve, x/net/webdav's http.ServeContent dropped the read error: the
// WebDAV side neither logged nor counted it.
func TestGetFailsLoudly(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plain bool // HTTP/1.1 without TLS; else HTTP/2 over TLS
	}{
		{"HTTP/1.1", true},
		{"HTTP/2", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			data := make([]byte, 1<<20)
			rand.Read(data)
			st, _, body := f.do("PUT", "/lost.bin", bytes.NewReader(data))
			want(t, "PUT", st, http.StatusCreated, body)
			// Lose the contents underneath the metadata.
			berthtest.LoseChunks(t, f.dir)

			// A handler of its own, to read its registry and log.
			logs := &berthtest.LogBuffer{}
			reg := prometheus.NewRegistry()
			h := webdav.New(webdav.Options{
				Logger:     slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
				FS:         f.fs,
				Accounts:   f.accounts,
				Registerer: reg,
			})
			srv := httptest.NewUnstartedServer(h)
			if tc.plain {
				srv.Start()
			} else {
				srv.EnableHTTP2 = true
				srv.StartTLS()
			}
			defer srv.Close()

			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/webdav/alice/lost.bin", nil)
			req.SetBasicAuth("alice", password)
			resp, err := srv.Client().Do(req)
			if err == nil {
				var got []byte
				got, err = io.ReadAll(resp.Body)
				resp.Body.Close()
				if err == nil && resp.StatusCode == http.StatusOK {
					t.Fatalf("a GET whose contents are lost looked complete: %d bytes of %d", len(got), len(data))
				}
				if err == nil {
					err = fmt.Errorf("status %d", resp.StatusCode)
				}
			}
			t.Logf("the client saw: %v", err)
			if resp != nil && resp.StatusCode != http.StatusOK {
				t.Errorf("status %d, want a broken 200 (the failure comes after the first byte)", resp.StatusCode)
			}

			if n := gatheredCounter(t, reg, "berth_http_aborted_streams_total"); n != 1 {
				t.Errorf("berth_http_aborted_streams_total = %v, want 1", n)
			}
			if !strings.Contains(logs.String(), "download failed after the response started") {
				t.Errorf("the failure was not logged:\n%s", logs)
			}
			// The server is still up.
			st, _, body = f.do("PROPFIND", "/lost.bin", nil, "Depth", "0")
			want(t, "PROPFIND after the abort", st, http.StatusMultiStatus, body)
		})
	}
}

// gatheredCounter sums the samples of the metric family name in reg (0 when the
// family is not there).
func gatheredCounter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			n += m.GetCounter().GetValue()
		}
	}
	return n
}
