// Package bench holds benchmarks that put numbers on berth as a whole:
// vfs-direct rates, the same transfers through the REST API over loopback
// TLS, a plain Go HTTPS server as the machine's ceiling, and the real
// daemon's memory during a zip. See README.md for how to run them.
package bench

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"berth/bench/internal/durable"
	"berth/berthtest"
	"berth/rest"
	"berth/vfs"
)

// gib is the size of each large transfer.
const gib = 1 << 30

// genReader is an endless stream of incompressible bytes, unique per seed
// (AES-CTR keystream: several GB/s on one core, so the generator costs
// little next to what it feeds, and the chunk store cannot deduplicate
// it).
type genReader struct {
	s    cipher.Stream
	left int64
}

func newGen(seed uint64, n int64) *genReader {
	var key [16]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	blk, err := aes.NewCipher(key[:])
	if err != nil {
		panic(err) // a 16-byte key always works
	}
	return &genReader{s: cipher.NewCTR(blk, make([]byte, aes.BlockSize)), left: n}
}

func (g *genReader) Read(p []byte) (int, error) {
	if g.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > g.left {
		p = p[:g.left]
	}
	clear(p)
	g.s.XORKeyStream(p, p)
	g.left -= int64(len(p))
	return len(p), nil
}

// discard drops writes; unlike io.Discard it has no ReadFrom, so copies
// into it use the caller's (large) buffer.
type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// drain reads r to its end through a 256 KiB buffer and returns the count.
func drain(r io.Reader) (int64, error) {
	return io.CopyBuffer(discard{}, r, make([]byte, 256<<10))
}

// berth is a real berth over real stores in a temp dir, served by rest.New
// over loopback TLS, with one person and a token.
type berth struct {
	fs     *vfs.FS
	srv    *httptest.Server
	client *http.Client
	root   vfs.Root
	token  string
}

// newBerth starts it; b.Cleanup stops it. h2 serves HTTP/2 instead of
// HTTP/1.1.
func newBerth(b *testing.B, h2 bool) *berth {
	b.Helper()
	st := berthtest.New(b, berthtest.Options{})
	_, root, token := st.AddPerson(b, "bench", "correct horse battery")
	fs := st.FS
	srv := httptest.NewUnstartedServer(rest.New(rest.Options{FS: fs, Accounts: st.Accounts}))
	srv.EnableHTTP2 = h2
	srv.StartTLS()
	b.Cleanup(srv.Close)
	return &berth{fs: fs, srv: srv, client: srv.Client(), root: root, token: token}
}

// do sends an authenticated request and fails on a status other than 200.
func (s *berth) do(b *testing.B, method, path string, body io.Reader, ct string) *http.Response {
	b.Helper()
	req, err := http.NewRequest(method, s.srv.URL+path, body)
	if err != nil {
		b.Fatal(err)
	}
	return s.doReq(b, req, ct)
}

// doReq is do for a request already built.
func (s *berth) doReq(b *testing.B, req *http.Request, ct string) *http.Response {
	b.Helper()
	method, path := req.Method, req.URL.Path
	req.Header.Set("Authorization", "Bearer "+s.token)
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		b.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, msg)
	}
	return resp
}

// upload streams size bytes of content as the multipart `file` of an
// upload to folder (never buffered whole, sent with its length as curl -F
// does) and returns the file's id.
func (s *berth) upload(b *testing.B, folder uint64, name string, content io.Reader, size int64) uint64 {
	b.Helper()
	body, n, ct := sizedMultipart(name, content, size)
	req, err := http.NewRequest(http.MethodPost, s.srv.URL+fmt.Sprintf("/api/2/files/%d/folder/%d/upload", s.root.ID, folder), body)
	if err != nil {
		b.Fatal(err)
	}
	req.ContentLength = n
	resp := s.doReq(b, req, ct)
	defer resp.Body.Close()
	var f struct {
		ID uint64 `json:"id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&f); err != nil {
		b.Fatal(err)
	}
	return f.ID
}

// get downloads path and returns the bytes read.
func (s *berth) get(b *testing.B, path string) int64 {
	b.Helper()
	resp := s.do(b, http.MethodGet, path, nil, "")
	defer resp.Body.Close()
	n, err := drain(resp.Body)
	if err != nil {
		b.Fatalf("GET %s after %d bytes: %v", path, n, err)
	}
	return n
}

// nullServer is the ceiling: a Go HTTPS server that discards PUT bodies
// and answers GET with size bytes from a buffer in RAM (/4k: 4096). A PUT
// to /durable it stores with durable.Put instead, the floor beside it.
func nullServer(b *testing.B, h2 bool, size int64) *httptest.Server {
	dir := b.TempDir()
	block := make([]byte, 4<<20)
	if _, err := io.ReadFull(newGen(99, int64(len(block))), block); err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/4k" {
			w.Header().Set("Content-Length", "4096")
			_, _ = w.Write(block[:4096])
			return
		}
		if r.Method == http.MethodPut && r.URL.Path == "/durable" {
			if err := durable.Put(filepath.Join(dir, "put.bin"), r.Body, make([]byte, 1<<20)); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
			}
			return
		}
		if r.Method == http.MethodPut {
			if _, err := drain(r.Body); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
			}
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(size))
		for sent := int64(0); sent < size; sent += int64(len(block)) {
			if _, err := w.Write(block[:min(int64(len(block)), size-sent)]); err != nil {
				return
			}
		}
	}))
	srv.EnableHTTP2 = h2
	srv.StartTLS()
	b.Cleanup(srv.Close)
	return srv
}

// rate is the MB/s (10^6 bytes) of a sub-benchmark that moved bytes per op.
func rate(b *testing.B, bytes int64) float64 {
	return float64(bytes) * float64(b.N) / b.Elapsed().Seconds() / 1e6
}

// zipFolder writes a folder of 1,000 files totalling 1 GiB directly
// through vfs and returns its id.
func zipFolder(b *testing.B, s *berth, next func() uint64) uint64 {
	ctx := context.Background()
	const files = 1000
	dir, err := s.fs.Mkdir(ctx, s.root.ID, s.root.FolderID, "zip", vfs.WriteOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for i := range files {
		// gib/files each, plus one byte for the first gib%files.
		size := int64(gib / files)
		if i < gib%files {
			size++
		}
		if _, err := s.fs.WriteFile(ctx, s.root.ID, dir.ID, fmt.Sprintf("file %04d.bin", i), newGen(next(), size), vfs.WriteOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	return dir.ID
}

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkREST measures, in one run and on one machine: the HTTPS
// ceiling (null server), the floor of a durable PUT (null-put-durable:
// the null server storing the body, fdatasynced), vfs-direct write and read of 1 GiB, REST upload
// and download of 1 GiB, and the zip of a folder of 1,000 files totalling
// 1 GiB; then logs the ratios the issue sets targets for. Run it with
// -benchtime=1x (each op moves 1 GiB). BERTH_BENCH_H2=1 uses HTTP/2
// instead of HTTP/1.1 on both servers.
func BenchmarkREST(b *testing.B) {
	h2 := os.Getenv("BERTH_BENCH_H2") == "1"
	ctx := context.Background()
	s := newBerth(b, h2)
	null := nullServer(b, h2, gib)
	nullClient := null.Client()
	rates := map[string]float64{}
	cpu := map[string]float64{} // CPU seconds (client and server) per GiB
	var setupCPU time.Duration  // CPU of untimed setup inside a sub-benchmark
	seed := uint64(1)
	next := func() uint64 { seed++; return seed }
	run := func(name string, size int64, op func(b *testing.B)) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(size)
			c0 := cpuTime()
			setupCPU = 0
			for b.Loop() {
				op(b)
			}
			rates[name] = rate(b, size)
			cpu[name] = (cpuTime() - c0 - setupCPU).Seconds() / float64(b.N) * gib / float64(size)
			b.ReportMetric(cpu[name], "cpu-s/GiB")
			if name == "rest-download" && rates["null-get"] > 0 {
				b.ReportMetric(rates[name]/rates["null-get"], "x-null")
			}
		})
	}

	run("null-put", gib, func(b *testing.B) {
		req, _ := http.NewRequest(http.MethodPut, null.URL, newGen(next(), gib))
		req.ContentLength = gib
		resp, err := nullClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
	})
	run("null-put-durable", gib, func(b *testing.B) {
		req, _ := http.NewRequest(http.MethodPut, null.URL+"/durable", newGen(next(), gib))
		req.ContentLength = gib
		resp, err := nullClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("durable PUT: %s", resp.Status)
		}
	})
	run("null-get", gib, func(b *testing.B) {
		resp, err := nullClient.Get(null.URL)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		if n, err := drain(resp.Body); err != nil || n != gib {
			b.Fatalf("%d bytes, %v", n, err)
		}
	})

	var vfsFile uint64
	run("vfs-write", gib, func(b *testing.B) {
		n, err := s.fs.WriteFile(ctx, s.root.ID, s.root.FolderID, "vfs.bin", newGen(next(), gib), vfs.WriteOptions{})
		if err != nil {
			b.Fatal(err)
		}
		vfsFile = n.ID
	})
	// ensure writes a 1 GiB file untimed when its write benchmark was
	// filtered out (-bench 'REST/rest-download').
	ensure := func(b *testing.B, id *uint64, name string) {
		if *id != 0 {
			return
		}
		b.StopTimer()
		c0 := cpuTime()
		n, err := s.fs.WriteFile(ctx, s.root.ID, s.root.FolderID, name, newGen(next(), gib), vfs.WriteOptions{})
		if err != nil {
			b.Fatal(err)
		}
		*id = n.ID
		setupCPU += cpuTime() - c0
		b.StartTimer()
	}
	run("vfs-read", gib, func(b *testing.B) {
		ensure(b, &vfsFile, "vfs.bin")
		f, err := s.fs.Open(ctx, s.root.ID, vfsFile)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if n, err := drain(f); err != nil || n != gib {
			b.Fatalf("%d bytes, %v", n, err)
		}
	})

	var restFile uint64
	run("rest-upload", gib, func(b *testing.B) {
		restFile = s.upload(b, s.root.FolderID, "rest.bin", newGen(next(), gib), gib)
	})
	run("rest-download", gib, func(b *testing.B) {
		ensure(b, &restFile, "rest.bin")
		if n := s.get(b, fmt.Sprintf("/api/2/files/%d/%d/download", s.root.ID, restFile)); n != gib {
			b.Fatalf("downloaded %d bytes", n)
		}
	})

	// The zip's folder: 1,000 files totalling 1 GiB, written directly.
	var dir uint64
	run("rest-zip", gib, func(b *testing.B) {
		if dir == 0 {
			b.StopTimer()
			c0 := cpuTime()
			dir = zipFolder(b, s, next)
			setupCPU += cpuTime() - c0
			b.StartTimer()
		}
		if n := s.get(b, fmt.Sprintf("/api/2/files/%d/folder/%d/download", s.root.ID, dir)); n < gib {
			b.Fatalf("zip of %d bytes", n)
		}
	})

	// 4 KiB GETs, 32 connections with keep-alive, against the null
	// server's 4 KiB from RAM in the same run.
	small := s.fs
	f4k, err := small.WriteFile(ctx, s.root.ID, s.root.FolderID, "4k.bin", newGen(next(), 4096), vfs.WriteOptions{})
	if err != nil {
		b.Fatal(err)
	}
	reqs := map[string]float64{}
	runGets := func(name string, client *http.Client, url, token string) {
		b.Run(name, func(b *testing.B) {
			tr := client.Transport.(*http.Transport).Clone()
			tr.MaxIdleConnsPerHost = getConns
			c := &http.Client{Transport: tr}
			defer tr.CloseIdleConnections()
			// The connections' handshakes are not what is measured.
			getMany(b, c, url, token, getConns, getConns)
			c0 := cpuTime()
			for b.Loop() {
				start := time.Now()
				getMany(b, c, url, token, getConns, getsPerOp)
				reqs[name] = getsPerOp / time.Since(start).Seconds()
			}
			b.ReportMetric(reqs[name], "req/s")
			// CPU per request (client and server) swings less than the
			// rate on a shared machine.
			b.ReportMetric(float64((cpuTime()-c0).Microseconds())/float64(b.N*getsPerOp), "cpu-µs/req")
			if name == "rest-get-4k" && reqs["null-get-4k"] > 0 {
				b.ReportMetric(reqs[name]/reqs["null-get-4k"], "x-null")
			}
		})
	}
	runGets("null-get-4k", nullClient, null.URL+"/4k", "")
	runGets("rest-get-4k", s.client, s.srv.URL+fmt.Sprintf("/api/2/files/%d/%d/download", s.root.ID, f4k.ID), s.token)

	proto := "HTTP/1.1"
	if h2 {
		proto = "HTTP/2"
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s over loopback TLS      MB/s   CPU s/GiB (client+server)\n", proto)
	for _, k := range []string{"null-put", "null-put-durable", "null-get", "vfs-write", "vfs-read", "rest-upload", "rest-download", "rest-zip"} {
		if rates[k] > 0 {
			fmt.Fprintf(&sb, "  %-14s %8.0f %8.2f\n", k, rates[k], cpu[k])
		}
	}
	ratio := func(name, a, c string, target float64) {
		if rates[a] == 0 || rates[c] == 0 {
			return // one side was filtered out
		}
		r := rates[a] / rates[c]
		verdict := ""
		if target > 0 {
			verdict = "ok"
			if r < target {
				verdict = fmt.Sprintf("MISSES %.0f%%", target*100)
			}
		}
		fmt.Fprintf(&sb, "  %-34s %5.2f  %s\n", name, r, verdict)
	}
	sb.WriteString("ratios:\n")
	ratio("rest-upload / vfs-write", "rest-upload", "vfs-write", 0.8)
	ratio("rest-download / vfs-read", "rest-download", "vfs-read", 0.8)
	ratio("rest-zip / rest-download", "rest-zip", "rest-download", 0.8)
	ratio("rest-upload / null-put (ceiling)", "rest-upload", "null-put", 0)
	ratio("rest-upload / null-put-durable (floor)", "rest-upload", "null-put-durable", 0)
	ratio("rest-download / null-get (ceiling)", "rest-download", "null-get", 0.9)
	if reqs["null-get-4k"] > 0 && reqs["rest-get-4k"] > 0 {
		fmt.Fprintf(&sb, "  4 KiB GETs x%d: null %.0f/s, rest %.0f/s, ratio %.2f (target 0.90)\n",
			getConns, reqs["null-get-4k"], reqs["rest-get-4k"], reqs["rest-get-4k"]/reqs["null-get-4k"])
	}
	ratio("rest-zip / null-get (ceiling)", "rest-zip", "null-get", 0)
	b.Log("\n" + sb.String())
}

// getConns and getsPerOp shape the small-GET figure: as wrk -c32, 32
// keep-alive connections, each sending its next GET when the last answer
// is read.
const (
	getConns  = 32
	getsPerOp = 20000
)

// getMany sends n GETs of url over conns connections at once and checks
// each answer is a 200 of 4 KiB.
func getMany(b *testing.B, c *http.Client, url, token string, conns, n int) {
	var left atomic.Int64
	left.Store(int64(n))
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 8192)
			for left.Add(-1) >= 0 {
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				resp, err := c.Do(req)
				if err != nil {
					errs <- err
					return
				}
				m, err := io.ReadFull(resp.Body, buf[:4096])
				resp.Body.Close()
				if err != nil || m != 4096 || resp.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("GET %s: %d, %d bytes, %v", url, resp.StatusCode, m, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}
