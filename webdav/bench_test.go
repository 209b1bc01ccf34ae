package webdav_test

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"berth/httpserve"
)

// BenchmarkPropfindDepth1 lists a folder of 10,000 files with PROPFIND
// Depth 1, allprop (no body) and four named properties, over TLS, with the
// Basic credential cache warm: over HTTP/2 (allprop, prop), and over
// HTTP/1.1 through the daemon's coalescing listener as bench/webdav.sh's
// client and the daemon talk (http1-*). Each reports the process's CPU
// time per PROPFIND (cpu-ms/op, client and server together), steadier
// than the rate on a shared machine. The ratio rows alternate the two
// requests on one connection and report the median of each and
// allprop/named, issue 15's figure (target 1.3), both sides in the same
// run:
//
//	go test -run XXX -bench PropfindDepth1 -benchtime 20x ./webdav/
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
	h1 := httptest.NewUnstartedServer(f.srv.Config.Handler)
	h1.Listener = httpserve.CoalesceListener(h1.Listener)
	h1.Config.ConnContext = httpserve.ConnContext
	h1.StartTLS()
	b.Cleanup(h1.Close)
	h1c := h1.Client()
	h1c.Transport.(*http.Transport).TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}

	props := `<D:propfind xmlns:D="DAV:"><D:prop><D:resourcetype/><D:getcontentlength/><D:getlastmodified/><D:getetag/></D:prop></D:propfind>`
	propfind := func(b *testing.B, c *http.Client, url, body string) int64 {
		req, _ := http.NewRequest("PROPFIND", url+"/webdav/alice/big/", strings.NewReader(body))
		req.SetBasicAuth("alice", password)
		req.Header.Set("Depth", "1")
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusMultiStatus {
			b.Fatalf("status %d", resp.StatusCode)
		}
		return n
	}
	for _, p := range []struct {
		prefix, url string
		client      *http.Client
	}{{"", f.srv.URL, f.client}, {"http1-", h1.URL, h1c}} {
		for _, c := range []struct{ name, body string }{{"allprop", ""}, {"prop", props}} {
			b.Run(p.prefix+c.name, func(b *testing.B) {
				propfind(b, p.client, p.url, c.body) // the connection and caches
				cpu := cpuTime()
				for b.Loop() {
					b.SetBytes(propfind(b, p.client, p.url, c.body))
				}
				b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/1000/float64(b.N), "cpu-ms/op")
			})
		}
		b.Run(p.prefix+"ratio", func(b *testing.B) {
			propfind(b, p.client, p.url, "")
			var all, named []time.Duration
			for i := 0; b.Loop(); i++ {
				// Which goes first alternates, against a bias of
				// following the other's garbage.
				for j := range 2 {
					body, into := "", &all
					if (i+j)%2 == 1 {
						body, into = props, &named
					}
					start := time.Now()
					propfind(b, p.client, p.url, body)
					*into = append(*into, time.Since(start))
				}
			}
			ma, mn := median(all), median(named)
			b.ReportMetric(float64(ma.Microseconds())/1000, "allprop-ms")
			b.ReportMetric(float64(mn.Microseconds())/1000, "named-ms")
			b.ReportMetric(float64(ma)/float64(mn), "allprop/named")
		})
	}
}

func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkIfDeep judges an If header of 256 tagged lists, each naming
// the same missing file below a folder 999 levels deep, each with a token
// no lock has: the GET is 412 after every list failed. It reports CPU
// per request (cpu-ms/op, client and server together). Finding a lock
// walked up from the missing name, looking each folder up again from the
// top, and every list judged its resource anew:
//
//	go test -run XXX -bench IfDeep -benchtime 3x ./webdav/
func BenchmarkIfDeep(b *testing.B) {
	f := newFixture(b)
	ctx := context.Background()
	st, _, body := f.do("PUT", "/p.txt", strings.NewReader("x"))
	want(b, "PUT", st, http.StatusCreated, body)
	parent := f.root.FolderID
	for range 999 {
		n, err := f.fs.Mkdir(ctx, f.root.ID, parent, "a", f.opts())
		if err != nil {
			b.Fatal(err)
		}
		parent = n.ID
	}
	tag := "<" + f.url(strings.Repeat("/a", 999)+"/x") + "> (<urn:uuid:00000000-0000-0000-0000-000000000000>) "
	hdr := strings.Repeat(tag, 256)
	b.ResetTimer()
	cpu := cpuTime()
	for range b.N {
		st, _, body := f.do("GET", "/p.txt", nil, "If", hdr)
		want(b, "GET", st, http.StatusPreconditionFailed, body)
	}
	b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/1000/float64(b.N), "cpu-ms/op")
}
