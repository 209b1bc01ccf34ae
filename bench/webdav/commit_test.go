package davbench

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
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
//     4 clients, 250 cycles a run;
//   - ops: the same cycle's requests from one client, each with its own
//     costs (CPU, store transactions and reads, fdatasyncs, allocations).
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
	report := func(b *testing.B, before badger.SyncStats, reads badger.TxnStats, cpu, user time.Duration, clients, ops int, unit string) {
		after, readsAfter := st.DB.SyncStats(), st.DB.TxnStats()
		n := float64(ops) * float64(b.N)
		b.ReportMetric(n/b.Elapsed().Seconds(), unit)
		// The process's CPU, the clients' (HTTPS) with the server's:
		// steadier than rates on a loaded machine.
		userNow, cpuNow := cpuTimes()
		b.ReportMetric(float64((cpuNow-cpu).Microseconds())/n, "cpu-µs/op")
		// Of which in user space: the system's share (fdatasync, the
		// value log's page faults, the sockets) swings most with what
		// else the disk and the machine do.
		b.ReportMetric(float64((userNow-user).Microseconds())/n, "user-µs/op")
		b.ReportMetric(float64(after.Commits-before.Commits)/n, "commits/op")
		b.ReportMetric(float64(after.Rounds-before.Rounds)/n, "rounds/op")
		b.ReportMetric(float64(after.Files-before.Files)/n, "fsyncs/op")
		// How long a round took, and a commit waited for its round: a
		// commit that arrives during a round waits for the rest of it
		// and all of the next, and the fdatasyncs slow down as the
		// requests load the cores (kv/badger's BenchmarkSyncRound).
		if rounds := after.Rounds - before.Rounds; rounds > 0 {
			b.ReportMetric(float64((after.RoundTime-before.RoundTime).Microseconds())/float64(rounds), "round-µs")
		}
		if commits := after.Commits - before.Commits; commits > 0 {
			b.ReportMetric(float64((after.WaitTime-before.WaitTime).Microseconds())/float64(commits), "wait-µs")
		}
		// The time from one of a client's requests to its next, for the
		// wait to be read against.
		b.ReportMetric(b.Elapsed().Seconds()*1e6*float64(clients)/n, "latency-µs")
		// Store transactions (read and write) and reads in them.
		b.ReportMetric(float64(readsAfter.Views+readsAfter.Updates-reads.Views-reads.Updates)/n, "txns/op")
		b.ReportMetric(float64(readsAfter.Gets+readsAfter.Scans-reads.Gets-reads.Scans)/n, "reads/op")
		b.ReportMetric(0, "ns/op")
	}
	b.Run("ops", func(b *testing.B) {
		// The cycle's four requests one at a time from one client, each
		// with what it cost: the process's CPU (clients' and server's),
		// the store's transactions, reads and fdatasyncs, and heap
		// allocations.
		const cycles = 200
		body := bytes.Repeat([]byte{7}, 4096)
		type cost struct {
			cpu, user                         time.Duration
			txns, gets, scans, syncs, mallocs uint64
		}
		names := []string{"MKCOL", "PUT", "MOVE", "DELETE"}
		var costs [4]cost
		run := 0
		for b.Loop() {
			run++
			for i := range cycles {
				dir := fmt.Sprintf("%sops%d-%d/", s.base, run, i)
				moved := fmt.Sprintf("%sops%d-%d-moved/", s.base, run, i)
				steps := [4]func() error{
					func() error { _, err := s.do("MKCOL", dir, nil, 0); return err },
					func() error { _, err := s.do("PUT", dir+"f.bin", bytes.NewReader(body), int64(len(body))); return err },
					func() error { _, err := s.do("MOVE", dir, nil, 0, "Destination", moved, "Overwrite", "F"); return err },
					func() error { _, err := s.do("DELETE", moved, nil, 0); return err },
				}
				for k, step := range steps {
					var ms runtime.MemStats
					runtime.ReadMemStats(&ms)
					u0, c0 := cpuTimes()
					m0, t0, s0 := ms.Mallocs, st.DB.TxnStats(), st.DB.SyncStats()
					if err := step(); err != nil {
						b.Fatal(err)
					}
					u1, c1 := cpuTimes()
					cpu, user := c1-c0, u1-u0
					t1, s1 := st.DB.TxnStats(), st.DB.SyncStats()
					runtime.ReadMemStats(&ms)
					c := &costs[k]
					c.cpu += cpu
					c.user += user
					c.txns += t1.Views + t1.Updates - t0.Views - t0.Updates
					c.gets += t1.Gets - t0.Gets
					c.scans += t1.Scans - t0.Scans
					c.syncs += s1.Files - s0.Files
					c.mallocs += ms.Mallocs - m0
				}
			}
		}
		n := float64(cycles * b.N)
		for k, c := range costs {
			b.ReportMetric(float64(c.cpu.Microseconds())/n, names[k]+"-cpu-µs")
			b.ReportMetric(float64(c.user.Microseconds())/n, names[k]+"-user-µs")
			b.ReportMetric(float64(c.txns)/n, names[k]+"-txns")
			b.ReportMetric(float64(c.gets+c.scans)/n, names[k]+"-reads")
			b.ReportMetric(float64(c.syncs)/n, names[k]+"-fsyncs")
			b.ReportMetric(float64(c.mallocs)/n, names[k]+"-allocs")
		}
		b.ReportMetric(0, "ns/op")
	})
	b.Run("put-small", func(b *testing.B) {
		user, cpu := cpuTimes()
		before, reads := st.DB.SyncStats(), st.DB.TxnStats()
		i := 0
		for b.Loop() {
			s.putFiles(b, "small"+fmt.Sprint(i), 2000)
			i++
		}
		report(b, before, reads, cpu, user, putClients, 2000, "files/s")
	})
	b.Run("cycles", func(b *testing.B) {
		const clients, cycles = 4, 250
		user, cpu := cpuTimes()
		before, reads := st.DB.SyncStats(), st.DB.TxnStats()
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
		report(b, before, reads, cpu, user, clients, cycles*4, "requests/s")
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

// cpuTimes is the CPU time this process has used: in user space, and in
// all (user and system), from one getrusage.
func cpuTimes() (user, all time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
