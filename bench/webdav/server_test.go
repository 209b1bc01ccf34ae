// Package davbench profiles berth's WebDAV front end in process, on the
// workloads of bench/webdav.sh, so that `go test -cpuprofile` shows where
// the time goes. The script measures the real binary; this is its
// magnifying glass.
package davbench

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"berth/berthtest"
	"berth/webdav"
)

const password = "bench password"

// server is a production-shaped berth WebDAV server: Badger with synced
// commits and the disk chunk store in a temp dir, behind httptest's TLS.
type server struct {
	srv    *httptest.Server
	client *http.Client
	base   string // the person's root folder URL, ending in /
}

func newServer(b *testing.B) *server {
	b.Helper()
	// Cheap argon2 (berthtest's): one check per run, kept out of the profile.
	st := berthtest.New(b, berthtest.Options{})
	st.AddPerson(b, "bench", password)
	srv := httptest.NewUnstartedServer(webdav.New(webdav.Options{FS: st.FS, Accounts: st.Accounts}))
	srv.StartTLS()
	tr := srv.Client().Transport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	// HTTP/1.1, as the script's clients speak to all three servers.
	tr.ForceAttemptHTTP2 = false
	tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	b.Cleanup(srv.Close)
	return &server{srv: srv, client: &http.Client{Transport: tr}, base: srv.URL + "/webdav/bench/"}
}

// do sends one request as the bench person and drains the answer. It
// returns an error rather than failing b, as it runs on client goroutines.
func (s *server) do(method, url string, body io.Reader, size int64, hdr ...string) (int, error) {
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		return 0, err
	}
	req.ContentLength = size
	req.SetBasicAuth("bench", password)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, err
	}
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, fmt.Errorf("%s %s: status %d", method, url, resp.StatusCode)
	}
	return resp.StatusCode, nil
}

// must is do on the benchmark's own goroutine.
func (s *server) must(b *testing.B, method, url string, body io.Reader, size int64, hdr ...string) {
	b.Helper()
	if _, err := s.do(method, url, body, size, hdr...); err != nil {
		b.Fatal(err)
	}
}

// noise is an endless incompressible stream: AES-CTR keystream.
func noise(seed byte) io.Reader {
	blk, _ := aes.NewCipher(bytes.Repeat([]byte{seed}, 16))
	return cipher.StreamReader{S: cipher.NewCTR(blk, make([]byte, 16)), R: zeros{}}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// putClients is how many clients putFiles runs, as bench/webdav.sh's.
const putClients = 8

// putFiles PUTs n distinct 4 KiB files into folder from putClients clients.
func (s *server) putFiles(b *testing.B, folder string, n int) {
	b.Helper()
	if st, err := s.do("MKCOL", s.base+folder+"/", nil, 0); err != nil && st != http.StatusMethodNotAllowed {
		b.Fatal(err)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, putClients)
	for c := range putClients {
		wg.Go(func() {
			src := noise(byte(c + 1))
			buf := make([]byte, 4096)
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				io.ReadFull(src, buf)
				if _, err := s.do("PUT", fmt.Sprintf("%s%s/f%05d.bin", s.base, folder, i), bytes.NewReader(buf), 4096); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkWebDAV runs the script's workloads against an in-process
// server. Sub-benchmarks run alone with -bench 'WebDAV/put-small' etc.;
// the large file is 256 MiB unless BENCH_BIG_MIB says otherwise.
//
//	go test ./bench/webdav -run XXX -bench WebDAV/put-large -benchtime 1x -cpuprofile cpu.prof
func BenchmarkWebDAV(b *testing.B) {
	big := int64(256)
	if v, err := strconv.ParseInt(os.Getenv("BENCH_BIG_MIB"), 10, 64); err == nil && v > 0 {
		big = v
	}
	s := newServer(b)
	s.must(b, "PROPFIND", s.base, nil, 0, "Depth", "0") // fills the credential cache
	putLarge := func(b *testing.B) {
		s.must(b, "PUT", s.base+"big.bin", io.LimitReader(noise(9), big<<20), big<<20)
	}
	b.Run("put-large", func(b *testing.B) {
		b.SetBytes(big << 20)
		for b.Loop() {
			putLarge(b)
		}
	})
	b.Run("get-large", func(b *testing.B) {
		b.StopTimer()
		putLarge(b)
		b.StartTimer()
		b.SetBytes(big << 20)
		for b.Loop() {
			s.must(b, "GET", s.base+"big.bin", nil, 0)
		}
	})
	b.Run("put-small", func(b *testing.B) {
		// One op is 2,000 PUTs of 4 KiB from 8 clients.
		i := 0
		for b.Loop() {
			s.putFiles(b, "small"+strconv.Itoa(i), 2000)
			i++
		}
		b.ReportMetric(2000*float64(b.N)/b.Elapsed().Seconds(), "files/s")
	})
	b.Run("get-small", func(b *testing.B) {
		b.StopTimer()
		s.putFiles(b, "get", 8)
		b.StartTimer()
		b.SetParallelism(16) // 32 clients on 2 cores, as wrk -c32
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := s.do("GET", s.base+"get/f00000.bin", nil, 0); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("propfind", func(b *testing.B) {
		b.StopTimer()
		s.putFiles(b, "list", 10000)
		b.StartTimer()
		const body = `<D:propfind xmlns:D="DAV:"><D:prop><D:resourcetype/><D:getcontentlength/><D:getlastmodified/><D:getetag/><D:creationdate/></D:prop></D:propfind>`
		for b.Loop() {
			s.must(b, "PROPFIND", s.base+"list/", bytes.NewReader([]byte(body)), int64(len(body)), "Depth", "1")
		}
	})
}
