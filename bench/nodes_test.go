package bench

import (
	"bytes"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"berth/berthtest"
	"berth/kv/postgres/pgtest"
	"berth/vfs/chunk/s3/s3test"
)

// Several nodes against one, in the same run (issue 18's targets), on a
// PostgreSQL (kv/postgres/pgtest) and a versitygw (vfs/chunk/s3/s3test)
// of this machine:
//
//	go test -run XXX -bench 'BenchmarkNodes' -benchtime 1x -v ./bench/
//	BERTH_BENCH_NODES_BIG_MIB=1024 go test -run XXX -bench 'BenchmarkNodes' -benchtime 1x -v ./bench/
//
// BenchmarkNodes/small: 2,000 uploads of 4 KiB from 8 clients on one node
// on Badger and disk (reference), one node on PostgreSQL and S3, and two
// nodes on the same, the clients spread over both; reports uploads/s of
// each and two_over_one (target 1.5), with the CPU seconds PostgreSQL
// (every process of its server) and versitygw spent in each.
// BenchmarkNodes/big: one file of BERTH_BENCH_NODES_BIG_MIB (default 256)
// uploaded through node A and downloaded through node B on PostgreSQL and
// S3, against one node on Badger and disk; MB/s each way and the ratios
// (target 0.8).

// benchSmallFiles and benchClients are the small-upload workload.
const (
	benchSmallFiles = 2000
	benchSmallSize  = 4 << 10
	benchClients    = 8
)

// pgCPU is the CPU time of every process of the PostgreSQL server in dir
// (the postmaster and its backends, live or ended): the database's own
// cost.
func pgCPU(srv *pgtest.Server) time.Duration {
	b, err := os.ReadFile(filepath.Join(srv.Dir, "data", "postmaster.pid"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		return 0
	}
	// The postmaster's own time and that of its children that ended
	// (backends of closed connections, autovacuum workers), which the
	// kernel adds to it as it reaps them: without it the figure fell
	// when a connection closed.
	total := procCPU(pid)
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+2:]))
		if len(f) > 14 {
			cu, _ := strconv.ParseInt(f[13], 10, 64)
			cs, _ := strconv.ParseInt(f[14], 10, 64)
			total += time.Duration(cu+cs) * 10 * time.Millisecond
		}
	}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		child, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", child))
		if err != nil {
			continue
		}
		f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+2:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			total += procCPU(child)
		}
	}
	return total
}

// cluster is one configuration of the benchmark: its nodes and what they
// run on.
type cluster struct {
	nodes []*daemon
	root  uint64
	// unavailable counts uploads answered 503 and sent again.
	unavailable atomic.Int64
}

// startCluster starts n nodes on env (nil: Badger and disk, one node),
// each in a data directory of its own, the first alone first (its first
// run creates the administrator).
func startCluster(b *testing.B, bin string, n int, env []string) *cluster {
	c := &cluster{}
	for i := range n {
		d := startDaemonEnv(b, bin, filepath.Join(b.TempDir(), fmt.Sprintf("node%d", i)), "", env)
		c.nodes = append(c.nodes, d)
	}
	var person struct {
		RootID uint64 `json:"root_id"`
	}
	c.nodes[0].decode(b, c.nodes[0].do(b, http.MethodGet, "/api/2/person", nil, ""), &person)
	c.root = person.RootID
	return c
}

func (c *cluster) stop() {
	for _, d := range c.nodes {
		d.stop()
	}
}

// smallUploads sends benchSmallFiles uploads from benchClients clients,
// client i to node i mod the nodes, and returns the time taken.
func (c *cluster) smallUploads(b *testing.B, prefix string) time.Duration {
	return smallClients(b, func(w, i int) error {
		d := c.nodes[w%len(c.nodes)]
		body := bytes.Repeat([]byte("x"), benchSmallSize)
		copy(body, fmt.Sprintf("%05d", i)) // distinct contents
		// A 503 temporarily_unavailable (a change that lost to others too
		// often) is tried again, as clients do, and counted.
		for {
			var buf bytes.Buffer
			mw := multipart.NewWriter(&buf)
			fw, _ := mw.CreateFormFile("file", fmt.Sprintf("%s-%05d.txt", prefix, i))
			fw.Write(body)
			mw.Close()
			req, _ := http.NewRequest(http.MethodPost, d.url(fmt.Sprintf("/api/2/files/%d/upload", c.root)), &buf)
			req.Header.Set("Authorization", "Bearer "+d.token)
			req.Header.Set("Content-Type", mw.FormDataContentType())
			resp, err := d.client.Do(req)
			if err != nil {
				return err
			}
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable {
				c.unavailable.Add(1)
				continue
			}
			if resp.StatusCode != 200 {
				return fmt.Errorf("upload %d to %s: %d %s", i, d.addr, resp.StatusCode, msg)
			}
			return nil
		}
	})
}

// smallClients runs the small-upload workload: benchClients clients at
// once, client w sending upload(w, i) for its share of the
// benchSmallFiles uploads; it returns the time they took, and fails b
// with the first error (which ends that client).
func smallClients(b *testing.B, upload func(w, i int) error) time.Duration {
	var wg sync.WaitGroup
	errs := make(chan error, benchClients)
	start := time.Now()
	for w := range benchClients {
		wg.Go(func() {
			for i := w; i < benchSmallFiles; i += benchClients {
				if err := upload(w, i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return took
}

// bigRoundTrip uploads size bytes through the first node and downloads
// them through the last, and returns both times.
func (c *cluster) bigRoundTrip(b *testing.B, size int64) (up, down time.Duration) {
	first, last := c.nodes[0], c.nodes[len(c.nodes)-1]
	start := time.Now()
	id := first.upload(b, c.root, c.rootFolder(b), "big.bin", newGen(7, size), size)
	up = time.Since(start)
	start = time.Now()
	resp := last.do(b, http.MethodGet, fmt.Sprintf("/api/2/files/%d/%d/download", c.root, id), nil, "")
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	down = time.Since(start)
	if err != nil || n != size || resp.StatusCode != 200 {
		b.Fatalf("download: %d, %d of %d bytes, %v", resp.StatusCode, n, size, err)
	}
	return up, down
}

// rootFolder is the id of the root's top folder.
func (c *cluster) rootFolder(b *testing.B) uint64 {
	var root struct {
		FolderID uint64 `json:"folder_id"`
		ID       uint64 `json:"id"`
	}
	c.nodes[0].decode(b, c.nodes[0].do(b, http.MethodGet, fmt.Sprintf("/api/2/files/%d", c.root), nil, ""), &root)
	if root.FolderID == 0 {
		// The top folder shares the root's id where the object has no
		// folder_id.
		return root.ID
	}
	return root.FolderID
}

func BenchmarkNodes(b *testing.B) {
	pg := pgtest.Start(b)
	srv := s3test.Start(b)
	bin := berthtest.BuildBerth(b)
	shared := func() []string {
		return append(srv.Env(srv.Bucket(b)), "BERTH_METADATA_BACKEND=postgres", "BERTH_METADATA_POSTGRES_DSN="+pg.NewDatabase(b))
	}

	b.Run("small", func(b *testing.B) {
		for range b.N {
			rate := map[string]float64{}
			for _, cfg := range []struct {
				name  string
				nodes int
				env   []string
			}{{"badger", 1, nil}, {"pg1", 1, shared()}, {"pg2", 2, shared()}} {
				c := startCluster(b, bin, cfg.nodes, cfg.env)
				pg0, s30 := pgCPU(pg), srv.CPU()
				b.Logf("%s: %d node(s)", cfg.name, cfg.nodes)
				took := c.smallUploads(b, cfg.name)
				rate[cfg.name] = benchSmallFiles / took.Seconds()
				b.ReportMetric(rate[cfg.name], cfg.name+"_uploads/s")
				b.ReportMetric(float64(c.unavailable.Load()), cfg.name+"_503s")
				if cfg.env != nil {
					b.ReportMetric((pgCPU(pg) - pg0).Seconds(), cfg.name+"_postgres_cpu_s")
					b.ReportMetric((srv.CPU() - s30).Seconds(), cfg.name+"_s3_cpu_s")
				}
				c.stop()
			}
			b.ReportMetric(rate["pg2"]/rate["pg1"], "two_over_one")
			b.ReportMetric(rate["pg2"]/rate["badger"], "two_over_badger")
		}
	})

	b.Run("big", func(b *testing.B) {
		mib := int64(256)
		if v, err := strconv.ParseInt(os.Getenv("BERTH_BENCH_NODES_BIG_MIB"), 10, 64); err == nil && v > 0 {
			mib = v
		}
		size := mib << 20
		for range b.N {
			local := startCluster(b, bin, 1, nil)
			lu, ld := local.bigRoundTrip(b, size)
			local.stop()
			two := startCluster(b, bin, 2, shared())
			pg0, s30 := pgCPU(pg), srv.CPU()
			ru, rd := two.bigRoundTrip(b, size)
			b.ReportMetric((pgCPU(pg) - pg0).Seconds(), "s3_postgres_cpu_s")
			b.ReportMetric((srv.CPU() - s30).Seconds(), "s3_server_cpu_s")
			two.stop()
			mb := float64(size) / 1e6
			b.ReportMetric(mb/lu.Seconds(), "disk_up_MB/s")
			b.ReportMetric(mb/ld.Seconds(), "disk_down_MB/s")
			b.ReportMetric(mb/ru.Seconds(), "s3_up_MB/s")
			b.ReportMetric(mb/rd.Seconds(), "s3_down_MB/s")
			b.ReportMetric(lu.Seconds()/ru.Seconds(), "up_s3_over_disk")
			b.ReportMetric(ld.Seconds()/rd.Seconds(), "down_s3_over_disk")
		}
	})
}
