package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"testing"

	"berth/berthtest"
	"berth/httpserve"
	"berth/rest"
	"berth/vfs"
	"berth/webdav"
)

// BenchmarkDownload measures a large GET through REST and WebDAV beside
// the null server's from memory, in one run: a cold GET (each op
// downloads a file written just before, untimed, as a client reads what
// it has just uploaded) and a warm one (a file read twice before, which
// the page cache then holds). It reports
// MB/s, CPU s/GiB (client and server: they share the machine, as in
// bench/webdav.sh) and x-null, the rate against null-get's. The size is
// BERTH_BENCH_MIB (1024 unless set); BERTH_BENCH_PROFILE=dir writes a CPU
// profile of each sub-benchmark's timed loop there, without the untimed
// writes. rest-warm-uncoalesced is rest-warm on a server without
// httpserve.CoalesceListener (one write call per TLS record). Run it with
// -benchtime=1x or a few x.
func BenchmarkDownload(b *testing.B) {
	size := int64(gib)
	if v, err := strconv.Atoi(os.Getenv("BERTH_BENCH_MIB")); err == nil && v > 0 {
		size = int64(v) << 20
	}
	profDir := os.Getenv("BERTH_BENCH_PROFILE")
	ctx := context.Background()
	const pass = "correct horse battery"
	st := berthtest.New(b, berthtest.Options{})
	_, root, token := st.AddPerson(b, "bench", pass)
	// serve starts h as the daemon does, with its records coalesced
	// (httpserve.CoalesceListener), or not, to show what that saves.
	serve := func(h http.Handler, coalesce bool) (*httptest.Server, *http.Client) {
		srv := httptest.NewUnstartedServer(h)
		if coalesce {
			srv.Listener = httpserve.CoalesceListener(srv.Listener)
			srv.Config.ConnContext = httpserve.ConnContext
		}
		srv.StartTLS()
		b.Cleanup(srv.Close)
		return srv, srv.Client()
	}
	apiHandler := rest.New(rest.Options{FS: st.FS, Accounts: st.Accounts})
	api, apiClient := serve(apiHandler, true)
	apiPlain, apiPlainClient := serve(apiHandler, false)
	dav, davClient := serve(webdav.New(webdav.Options{FS: st.FS, Accounts: st.Accounts}), true)
	null := nullServer(b, false, size)
	seed := uint64(100)
	write := func(name string) vfs.Node {
		seed++
		n, err := st.FS.WriteFile(ctx, root.ID, root.FolderID, name, newGen(seed, size), vfs.WriteOptions{})
		if err != nil {
			b.Fatal(err)
		}
		return n
	}
	get := func(b *testing.B, client *http.Client, url string, auth func(*http.Request)) {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			b.Fatal(err)
		}
		auth(req)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		if n, err := drain(resp.Body); err != nil || resp.StatusCode != http.StatusOK || n != size {
			b.Fatalf("GET %s: %d, %d bytes, %v", url, resp.StatusCode, n, err)
		}
	}
	bearer := func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }
	basic := func(r *http.Request) { r.SetBasicAuth("bench", pass) }
	restURLOf := func(srv *httptest.Server, n vfs.Node) string {
		return fmt.Sprintf("%s/api/2/files/%d/%d/download", srv.URL, root.ID, n.ID)
	}
	restURL := func(n vfs.Node) string { return restURLOf(api, n) }
	davURL := func(n vfs.Node) string { return dav.URL + "/webdav/bench/" + n.Name }

	rates := map[string]float64{}
	// untimed runs f with the timer stopped, and takes its CPU out of
	// the sub-benchmark's.
	var setup float64
	untimed := func(b *testing.B, f func()) {
		b.StopTimer()
		c0 := cpuTime()
		f()
		setup += (cpuTime() - c0).Seconds()
		b.StartTimer()
	}
	run := func(name string, op func(b *testing.B, fresh func(string) vfs.Node)) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(size)
			setup = 0
			fresh := func(name string) (n vfs.Node) {
				untimed(b, func() { n = write(name) })
				return n
			}
			if profDir != "" {
				f, err := os.Create(filepath.Join(profDir, name+".prof"))
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				// Untimed writes land in the profile too; they are
				// under vfs.(*FS).WriteFile, easy to leave out.
				if err := pprof.StartCPUProfile(f); err != nil {
					b.Fatal(err)
				}
				defer pprof.StopCPUProfile()
			}
			c0 := cpuTime()
			for b.Loop() {
				op(b, fresh)
			}
			rates[name] = float64(size) * float64(b.N) / b.Elapsed().Seconds() / 1e6
			cpu := ((cpuTime() - c0).Seconds() - setup) / float64(b.N) * gib / float64(size)
			b.ReportMetric(cpu, "cpu-s/GiB")
			if name != "null-get" && rates["null-get"] > 0 {
				b.ReportMetric(rates[name]/rates["null-get"], "x-null")
			}
		})
	}
	run("null-get", func(b *testing.B, _ func(string) vfs.Node) {
		get(b, null.Client(), null.URL, func(*http.Request) {})
	})
	// The warm file is written and read twice before the warm runs, so
	// that none of them pays for the write's work in the background, and
	// it is in the page cache (a blob read again is kept there).
	warm := write("warm.bin")
	get(b, apiClient, restURL(warm), bearer)
	get(b, apiClient, restURL(warm), bearer)
	run("rest-warm", func(b *testing.B, _ func(string) vfs.Node) {
		get(b, apiClient, restURL(warm), bearer)
	})
	run("rest-warm-uncoalesced", func(b *testing.B, _ func(string) vfs.Node) {
		get(b, apiPlainClient, restURLOf(apiPlain, warm), bearer)
	})
	run("webdav-warm", func(b *testing.B, _ func(string) vfs.Node) {
		get(b, davClient, davURL(warm), basic)
	})
	cold := 0
	run("rest-cold", func(b *testing.B, fresh func(string) vfs.Node) {
		cold++
		get(b, apiClient, restURL(fresh(fmt.Sprintf("rest-cold-%d.bin", cold))), bearer)
	})
	run("webdav-cold", func(b *testing.B, fresh func(string) vfs.Node) {
		cold++
		get(b, davClient, davURL(fresh(fmt.Sprintf("dav-cold-%d.bin", cold))), basic)
	})
}

// BenchmarkSmallGets measures 4 KiB REST downloads, getConns connections
// with keep-alive, on a server as the daemon's (records coalesced) and on
// one without httpserve.CoalesceListener, beside the null server's 4 KiB
// from memory, in one run: req/s, CPU µs per request (client and server)
// and x-null, the rate against null-get-4k's.
func BenchmarkSmallGets(b *testing.B) {
	ctx := context.Background()
	st := berthtest.New(b, berthtest.Options{})
	_, root, token := st.AddPerson(b, "bench", "correct horse battery")
	f, err := st.FS.WriteFile(ctx, root.ID, root.FolderID, "4k.bin", newGen(3, 4096), vfs.WriteOptions{})
	if err != nil {
		b.Fatal(err)
	}
	h := rest.New(rest.Options{FS: st.FS, Accounts: st.Accounts})
	null := nullServer(b, false, gib)
	reqs := map[string]float64{}
	run := func(name string, coalesce bool, null *httptest.Server) {
		b.Run(name, func(b *testing.B) {
			srv, url, tok := null, "", ""
			if srv != nil {
				url = null.URL + "/4k"
			} else {
				srv = httptest.NewUnstartedServer(h)
				if coalesce {
					srv.Listener = httpserve.CoalesceListener(srv.Listener)
					srv.Config.ConnContext = httpserve.ConnContext
				}
				srv.StartTLS()
				defer srv.Close()
				url, tok = fmt.Sprintf("%s/api/2/files/%d/%d/download", srv.URL, root.ID, f.ID), token
			}
			tr := srv.Client().Transport.(*http.Transport).Clone()
			tr.MaxIdleConnsPerHost = getConns
			c := &http.Client{Transport: tr}
			defer tr.CloseIdleConnections()
			getMany(b, c, url, tok, getConns, getConns) // the handshakes
			c0 := cpuTime()
			for b.Loop() {
				getMany(b, c, url, tok, getConns, getsPerOp)
			}
			reqs[name] = float64(getsPerOp*b.N) / b.Elapsed().Seconds()
			b.ReportMetric(reqs[name], "req/s")
			b.ReportMetric(float64((cpuTime()-c0).Microseconds())/float64(b.N*getsPerOp), "cpu-µs/req")
			if null == nil && reqs["null-get-4k"] > 0 {
				b.ReportMetric(reqs[name]/reqs["null-get-4k"], "x-null")
			}
		})
	}
	run("null-get-4k", false, null)
	run("rest-get-4k", true, nil)
	run("rest-get-4k-uncoalesced", false, nil)
}
