package bench

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"berth/berthtest"
)

// BenchmarkDaemonRSS starts the real daemon with its default memory
// settings and reports its resident memory: idle after the start (VmRSS,
// target < 40 MiB) and the peak (VmHWM) over a mix of transfers through
// REST: one upload and one download of 256 MiB, 500 uploads of 4 KiB from
// 8 clients, then 5,000 GETs of 4 KiB over 32 connections (target < 100
// MiB). Like BenchmarkDaemonZipRSS it logs in on a first start and
// measures a second, so the administrator's password hash is not in the
// figures. Run with -benchtime=1x.
func BenchmarkDaemonRSS(b *testing.B) {
	const mib = 1 << 20
	d := restartedDaemon(b)
	pid := d.cmd.Process.Pid
	time.Sleep(2 * time.Second) // let the start's garbage be collected
	idle := procStatus(b, pid, "VmRSS")
	idlePeak := procStatus(b, pid, "VmHWM")

	var person struct {
		RootID uint64 `json:"root_id"`
	}
	d.decode(b, d.do(b, http.MethodGet, "/api/2/person", nil, ""), &person)
	root := person.RootID
	var folder struct {
		ID uint64 `json:"id"`
	}
	d.decode(b, d.do(b, http.MethodPost, fmt.Sprintf("/api/2/files/%d/create_folder", root),
		strings.NewReader(url.Values{"name": {"mix"}}.Encode()), "application/x-www-form-urlencoded"), &folder)
	upload := func(name string, size int64, seed uint64) uint64 {
		return d.upload(b, root, folder.ID, name, newGen(seed, size), size)
	}

	for i := 0; b.Loop(); i++ {
		big := upload(fmt.Sprintf("big-%d.bin", i), 256*mib, uint64(7+i))
		resp := d.do(b, http.MethodGet, fmt.Sprintf("/api/2/files/%d/%d/download", root, big), nil, "")
		n, err := drain(resp.Body)
		resp.Body.Close()
		if err != nil || n != 256*mib {
			b.Fatalf("download: %d bytes, %v", n, err)
		}
		var wg sync.WaitGroup
		var small uint64
		var once sync.Once
		for c := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range 500 / 8 {
					id := upload(fmt.Sprintf("s-%d-%d-%d.bin", i, c, j), 4096, uint64(1e6+i*1e4+c*1e3+j))
					once.Do(func() { small = id })
				}
			}()
		}
		wg.Wait()
		tr := d.client.Transport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = getConns
		getMany(b, &http.Client{Transport: tr}, d.url(fmt.Sprintf("/api/2/files/%d/%d/download", root, small)), d.token, getConns, 5000)
		tr.CloseIdleConnections()
	}
	b.StopTimer()
	peak := procStatus(b, pid, "VmHWM")
	b.ReportMetric(float64(idle)/mib, "idle-RSS-MiB")
	b.ReportMetric(float64(peak)/mib, "peak-RSS-MiB")
	b.Logf("idle RSS %.1f MiB (peak before any request %.1f; target < 40), peak RSS over the mix %.1f MiB (target < 100)",
		float64(idle)/mib, float64(idlePeak)/mib, float64(peak)/mib)
}

// BenchmarkDaemonWebDAVRSS is bench/webdav.sh's berth turn without the
// peers or nginx: the real daemon with its default memory settings, over
// WebDAV with Basic auth (one password hash, then the handler's cache, as
// in the script), in the script's order: 10,000 PUTs of 4 KiB from
// 8 clients (the PROPFIND folder), a PUT and a GET of one large file
// (BERTH_BENCH_BIG_MIB, default 1024), 2,000 PUTs of 4 KiB from 8
// clients, 5,000 GETs of 4 KiB over 32 connections and 5 PROPFINDs
// Depth 1 allprop of the 10,000-file folder. It reports the idle RSS
// (target < 40 MiB), the peak over the whole mix (VmHWM, target < 100
// MiB), and each phase's own peak: the peak is reset (clear_refs) before
// each phase, and the Go heap in use is sampled from /metrics during it,
// with what made up the largest resident set sampled (/proc/PID/smaps:
// anonymous memory, the program, Badger's mapped logs and tables).
// BERTH_MEMORY_* settings in the environment reach the daemon, to weigh
// them against the defaults.
// The large transfers also report MB/s and the daemon's CPU seconds per
// GiB (user + system from /proc). Run with -benchtime=1x.
func BenchmarkDaemonWebDAVRSS(b *testing.B) {
	const mib = 1 << 20
	bigMiB := int64(1024)
	if v, err := strconv.ParseInt(os.Getenv("BERTH_BENCH_BIG_MIB"), 10, 64); err == nil && v > 0 {
		bigMiB = v
	}
	big := bigMiB * mib
	d := restartedDaemon(b)
	pid := d.cmd.Process.Pid
	metrics := "http://" + d.listening(b, "metrics") + "/metrics"
	time.Sleep(2 * time.Second) // let the start's garbage be collected
	idle := procStatus(b, pid, "VmRSS")
	base := d.url(webdavRoot(b, d))

	tr := d.client.Transport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = getConns
	c := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	dav := func(method, url string, body io.Reader, size int64, hdr ...string) *http.Response {
		req, err := http.NewRequest(method, url, body)
		if err != nil {
			b.Fatal(err)
		}
		req.ContentLength = size
		req.SetBasicAuth("admin", daemonPassword)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		return resp
	}
	expect := func(resp *http.Response, codes ...int) {
		b.Helper()
		_, err := drain(resp.Body)
		resp.Body.Close()
		if err != nil || !slices.Contains(codes, resp.StatusCode) {
			b.Fatalf("%s %s: %d, %v", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, err)
		}
	}
	puts := func(folder string, n int, seed uint64) {
		expect(dav("MKCOL", base+folder+"/", nil, 0), http.StatusCreated)
		var left atomic.Int64
		left.Store(int64(n))
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for i := left.Add(-1); i >= 0; i = left.Add(-1) {
					url := fmt.Sprintf("%s%s/f%05d.bin", base, folder, i)
					expect(dav(http.MethodPut, url, newGen(seed+uint64(i), 4096), 4096), http.StatusCreated, http.StatusNoContent)
				}
			})
		}
		wg.Wait()
	}

	// One log line a phase: a benchmark's log is cut after ten lines.
	var peak int64
	phase := func(name string, f func(), more ...func() string) {
		if err := resetPeakRSS(pid); err != nil {
			b.Fatal(err)
		}
		stop := make(chan struct{})
		used := make(chan usage)
		go func() { used <- sample(metrics, pid, stop) }()
		f()
		close(stop)
		u := <-used
		p := procStatus(b, pid, "VmHWM")
		peak = max(peak, p)
		b.ReportMetric(float64(p)/mib, name+"-peak-RSS-MiB")
		line := fmt.Sprintf("%-10s peak RSS %5.1f MiB; maxima: Go heap in use %5.1f, RssAnon %5.1f, RssFile %5.1f; %d GCs; largest sample %5.1f: %v, Go heap in use %.1f",
			name, float64(p)/mib, u.heap/mib, u.anon/mib, u.file/mib, u.gcs, u.rss/mib, u.at, u.atHeap/mib)
		for _, m := range more {
			line += "; " + m()
		}
		b.Log(line)
	}
	transfer := func(name string, f func()) {
		cpu0, t0 := procCPU(pid), time.Now()
		phase(name, f, func() string {
			secs, cpu := time.Since(t0).Seconds(), (procCPU(pid) - cpu0).Seconds()
			b.ReportMetric(float64(big)/secs/1e6, name+"-MB/s")
			b.ReportMetric(cpu/(float64(big)/(1<<30)), name+"-CPU-s/GiB")
			return fmt.Sprintf("%.0f MB/s, %.2f CPU s/GiB", float64(big)/secs/1e6, cpu/(float64(big)/(1<<30)))
		})
	}

	for i := 0; b.Loop(); i++ {
		if i > 0 {
			b.Fatal("run with -benchtime=1x")
		}
		phase("list-puts", func() { puts("list", 10000, 1e6) })
		transfer("put-big", func() {
			expect(dav(http.MethodPut, base+"big.bin", newGen(7, big), big), http.StatusCreated, http.StatusNoContent)
		})
		transfer("get-big", func() {
			resp := dav(http.MethodGet, base+"big.bin", nil, 0)
			n, err := drain(resp.Body)
			resp.Body.Close()
			if err != nil || n != big {
				b.Fatalf("GET big: %d bytes, %v", n, err)
			}
		})
		phase("small-puts", func() { puts("small", 2000, 2e6) })
		phase("small-gets", func() {
			var left atomic.Int64
			left.Store(5000)
			var wg sync.WaitGroup
			for range getConns {
				wg.Go(func() {
					for left.Add(-1) >= 0 {
						expect(dav(http.MethodGet, base+"small/f00000.bin", nil, 0), http.StatusOK)
					}
				})
			}
			wg.Wait()
		})
		phase("propfind", func() {
			for range 5 {
				expect(dav("PROPFIND", base+"list/", strings.NewReader(`<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>`), -1, "Depth", "1"), http.StatusMultiStatus)
			}
		})
	}
	b.StopTimer()
	b.ReportMetric(float64(idle)/mib, "idle-RSS-MiB")
	b.ReportMetric(float64(peak)/mib, "peak-RSS-MiB")
	b.Logf("idle RSS %.1f MiB (target < 40), peak RSS over the WebDAV mix %.1f MiB (target < 100)", float64(idle)/mib, float64(peak)/mib)
}

// restartedDaemon starts the daemon on a new data directory, logs in,
// and starts it again with the token: the first start's password hash
// and set-up are not in the second's figures. The memory settings of the
// environment (BERTH_MEMORY_*) pass through to both, to compare them
// with the defaults on one binary.
func restartedDaemon(b *testing.B) *daemon {
	b.Helper()
	var env []string
	for _, e := range os.Environ() {
		if strings.HasPrefix(e, "BERTH_MEMORY_") {
			env = append(env, e)
		}
	}
	if env != nil {
		b.Logf("daemon settings: %s", strings.Join(env, " "))
	}
	bin := berthtest.BuildBerth(b)
	data := filepath.Join(b.TempDir(), "data")
	d := startDaemonEnv(b, bin, data, "", env)
	token := d.token
	d.stop()
	return startDaemonEnv(b, bin, data, token, env)
}

// webdavRoot returns the path of the first root under /webdav/ (the
// administrator's own), as bench/webdav.sh finds it.
func webdavRoot(b *testing.B, d *daemon) string {
	b.Helper()
	req, err := http.NewRequest("PROPFIND", d.url("/webdav/"), nil)
	if err != nil {
		b.Fatal(err)
	}
	req.SetBasicAuth("admin", daemonPassword)
	req.Header.Set("Depth", "1")
	resp, err := d.client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusMultiStatus {
		b.Fatalf("PROPFIND /webdav/: %d, %v", resp.StatusCode, err)
	}
	for _, m := range regexp.MustCompile(`<(?:\w+:)?href>([^<]*)</`).FindAllStringSubmatch(string(body), -1) {
		if m[1] != "/webdav/" {
			return strings.TrimSuffix(m[1], "/") + "/"
		}
	}
	b.Fatalf("no root under /webdav/: %s", body)
	return ""
}

// usage is the most of each kind of memory seen during a phase, and
// what made up the resident set when it was largest.
type usage struct {
	heap, anon, file float64 // Go heap in use, RssAnon, RssFile; bytes
	gcs              int     // Go collections during the phase
	rss              float64 // VmRSS at the largest sample
	at               smaps   // the resident set at that sample, by mapping
	atHeap           float64 // Go heap in use at that sample
}

// smaps is a resident set split by what is mapped (/proc/PID/smaps),
// in bytes.
type smaps struct {
	anon    float64 // anonymous: the Go heap, goroutine stacks, the runtime's own
	program float64 // the berth binary's text and data
	memLog  float64 // Badger's memtable write-ahead logs (*.mem)
	vlog    float64 // Badger's value logs (*.vlog)
	tables  float64 // Badger's tables (*.sst)
	other   float64 // anything else: shared libraries, the vDSO
}

func (s smaps) String() string {
	const mib = 1 << 20
	return fmt.Sprintf("anon %.1f, program %.1f, Badger *.mem %.1f, *.vlog %.1f, *.sst %.1f, other %.1f MiB",
		s.anon/mib, s.program/mib, s.memLog/mib, s.vlog/mib, s.tables/mib, s.other/mib)
}

// readSmaps splits the process's resident set by mapping.
func readSmaps(pid int) (smaps, error) {
	var s smaps
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return s, err
	}
	var kind *float64
	for line := range strings.SplitSeq(string(data), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case strings.Contains(f[0], "-") && len(f) >= 5: // a mapping's header
			name := ""
			if len(f) >= 6 {
				name = f[5]
			}
			switch {
			case name == "" || name == "[heap]" || name == "[stack]" || strings.HasPrefix(name, "[anon"):
				kind = &s.anon
			case strings.HasSuffix(name, ".mem"):
				kind = &s.memLog
			case strings.HasSuffix(name, ".vlog"):
				kind = &s.vlog
			case strings.HasSuffix(name, ".sst"):
				kind = &s.tables
			case filepath.Base(name) == "berth":
				kind = &s.program
			default:
				kind = &s.other
			}
		case f[0] == "Rss:" && kind != nil && len(f) >= 2:
			kb, _ := strconv.ParseFloat(f[1], 64)
			*kind += kb * 1024
		}
	}
	return s, nil
}

// sample polls the daemon's Go heap in use (/metrics at url) and its
// anonymous and file-backed resident memory (/proc) every 50 ms until
// stop is closed, and returns the largest values seen: the file-backed
// part is the metadata store's memory-mapped logs.
func sample(url string, pid int, stop <-chan struct{}) usage {
	var u usage
	gcs0 := -1 // the collections counted before the phase
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		// Not gzipped: compressing every scrape would add its own buffers
		// to the figures.
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Accept-Encoding", "identity")
		var heap float64
		if resp, err := http.DefaultClient.Do(req); err == nil {
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_heap_inuse_bytes "); ok {
					if f, err := strconv.ParseFloat(v, 64); err == nil {
						heap = f
						u.heap = max(u.heap, f)
					}
				}
				if v, ok := strings.CutPrefix(sc.Text(), "go_gc_duration_seconds_count "); ok {
					if n, err := strconv.Atoi(v); err == nil {
						if gcs0 < 0 {
							gcs0 = n
						}
						u.gcs = n - gcs0
					}
				}
			}
			resp.Body.Close()
		}
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
			for line := range strings.SplitSeq(string(st), "\n") {
				k, v, _ := strings.Cut(line, ":")
				kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				switch {
				case err != nil:
				case k == "RssAnon":
					u.anon = max(u.anon, kb*1024)
				case k == "RssFile":
					u.file = max(u.file, kb*1024)
				case k == "VmRSS" && kb*1024 > u.rss:
					// A new largest resident set: what it is made of.
					if at, err := readSmaps(pid); err == nil {
						u.rss, u.at, u.atHeap = kb*1024, at, heap
					}
				}
			}
		}
		select {
		case <-stop:
			return u
		case <-t.C:
		}
	}
}
