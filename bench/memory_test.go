package bench

import (
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
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
	bin := berthtest.BuildBerth(b)
	data := filepath.Join(b.TempDir(), "data")
	d := startDaemon(b, bin, data, "")
	token := d.token
	d.stop()
	d = startDaemon(b, bin, data, token)
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
