package davbench

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"berth/berthtest"
	"berth/kv/badger"
	"berth/webdav"
)

// BenchmarkSmallWrites measures the durable small writes of issue 15 item
// 3 against an in-process berth (Badger with synced commits, the disk
// chunk store), over HTTPS as bench/webdav.sh's clients speak:
//
//   - put-small: 2,000 PUTs of distinct 4 KiB files from 8 clients;
//   - cycles: MKCOL, PUT of 4 KiB, MOVE of the folder, DELETE of it, from
//     4 clients, 250 cycles a run.
//
// Each reports its rate and what durability cost per operation (a PUT, or
// one request of a cycle): metadata commits, sync rounds (one fsync round
// covers every commit that finished before it started) and log fdatasyncs.
// Files of 4 KiB are kept inside their revision record (vfs.InlineMax), so
// the chunk store syncs nothing here.
//
//	go test ./bench/webdav -run XXX -bench SmallWrites -benchtime 1x -v
func BenchmarkSmallWrites(b *testing.B) {
	st := berthtest.New(b, berthtest.Options{})
	st.AddPerson(b, "bench", password)
	srv := httptest.NewUnstartedServer(webdav.New(webdav.Options{FS: st.FS, Accounts: st.Accounts}))
	srv.StartTLS()
	b.Cleanup(srv.Close)
	tr := srv.Client().Transport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	tr.ForceAttemptHTTP2 = false
	tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	s := &server{srv: srv, client: &http.Client{Transport: tr}, base: srv.URL + "/webdav/bench/"}
	s.must(b, "PROPFIND", s.base, nil, 0, "Depth", "0") // fills the credential cache

	// report sets the rate and the per-operation costs of ops operations
	// that ran between before and now.
	report := func(b *testing.B, before badger.SyncStats, cpu time.Duration, ops int, unit string) {
		after := st.DB.SyncStats()
		n := float64(ops) * float64(b.N)
		b.ReportMetric(n/b.Elapsed().Seconds(), unit)
		// The process's CPU, the clients' (HTTPS) with the server's:
		// steadier than rates on a loaded machine.
		b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/n, "cpu-µs/op")
		b.ReportMetric(float64(after.Commits-before.Commits)/n, "commits/op")
		b.ReportMetric(float64(after.Rounds-before.Rounds)/n, "rounds/op")
		b.ReportMetric(float64(after.Files-before.Files)/n, "fsyncs/op")
		b.ReportMetric(0, "ns/op")
	}
	b.Run("put-small", func(b *testing.B) {
		before, cpu := st.DB.SyncStats(), cpuTime()
		i := 0
		for b.Loop() {
			s.putFiles(b, "small"+fmt.Sprint(i), 2000)
			i++
		}
		report(b, before, cpu, 2000, "files/s")
	})
	b.Run("cycles", func(b *testing.B) {
		const clients, cycles = 4, 250
		before, cpu := st.DB.SyncStats(), cpuTime()
		run := 0
		for b.Loop() {
			run++
			var next atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, clients)
			for c := range clients {
				wg.Go(func() {
					body := bytes.Repeat([]byte{byte(c)}, 4096)
					for {
						i := next.Add(1) - 1
						if i >= cycles {
							return
						}
						if err := s.cycle(fmt.Sprintf("r%d-c%d-%d", run, c, i), body); err != nil {
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
		// Four requests a cycle; the rate is in cycles.
		report(b, before, cpu, cycles*4, "requests/s")
		b.ReportMetric(float64(cycles*b.N)/b.Elapsed().Seconds(), "cycles/s")
	})
}

// cycle is one MKCOL+PUT+MOVE+DELETE cycle of bench/webdav.sh's clients
// over the folder name.
func (s *server) cycle(name string, body []byte) error {
	dir := s.base + name + "/"
	moved := s.base + name + "-moved/"
	if _, err := s.do("MKCOL", dir, nil, 0); err != nil {
		return err
	}
	if _, err := s.do("PUT", dir+"f.bin", bytes.NewReader(body), int64(len(body))); err != nil {
		return err
	}
	if _, err := s.do("MOVE", dir, nil, 0, "Destination", moved, "Overwrite", "F"); err != nil {
		return err
	}
	_, err := s.do("DELETE", moved, nil, 0)
	return err
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
