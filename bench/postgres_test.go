package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"berth/berthtest"
	"berth/kv"
	"berth/kv/postgres"
	"berth/kv/postgres/pgtest"
	"berth/vfs"
	"berth/webdav"
)

// pgStack builds a berthtest stack whose metadata is on a new database of
// srv.
func pgStack(t testing.TB, srv *pgtest.Server) *berthtest.Stack {
	st, _ := pgStackDB(t, srv)
	return st
}

// pgStackDB is pgStack that also returns the store, for its round trips.
func pgStackDB(t testing.TB, srv *pgtest.Server) (*berthtest.Stack, *postgres.DB) {
	t.Helper()
	db, err := postgres.Open(context.Background(), postgres.Options{DSN: srv.NewDatabase(t)})
	if err != nil {
		t.Fatal(err)
	}
	return berthtest.New(t, berthtest.Options{Store: db}), db
}

// TestVFSOnPostgres runs a representative file-system scenario on the
// PostgreSQL engine: concurrent uploads into one folder, listing and its
// hash, rename, move, a second revision, a lock, delete, and fsck and
// garbage collection clean at the end. kvtest checks the engine against
// kv's contract; this checks that vfs, written against Badger, keeps its
// invariants on it.
func TestVFSOnPostgres(t *testing.T) {
	srv := pgtest.Start(t)
	st := pgStack(t, srv)
	fs := st.FS
	ctx := context.Background()
	root, err := fs.CreateRoot(ctx, "alice", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := fs.Mkdir(ctx, root.ID, root.FolderID, "docs", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 5
	body := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 1000+i*300_000) }
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for j := range each {
				i := w*each + j
				if _, err := fs.WriteFile(ctx, root.ID, dir.ID, fmt.Sprintf("f%02d", i), bytes.NewReader(body(i%4)), vfs.WriteOptions{}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	nodes, hash1, err := fs.List(ctx, root.ID, dir.ID)
	if err != nil || len(nodes) != writers*each {
		t.Fatalf("List = %d nodes, %v; want %d", len(nodes), err, writers*each)
	}

	f, err := fs.Lookup(ctx, root.ID, "/docs/f01")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Rename(ctx, root.ID, f.ID, "renamed", vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	_, hash2, err := fs.List(ctx, root.ID, dir.ID)
	if err != nil || hash2 == hash1 {
		t.Fatalf("listing hash after a rename: %q, %v (before %q)", hash2, err, hash1)
	}
	if _, err := fs.Move(ctx, root.ID, f.ID, root.FolderID, "moved", vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.WriteFile(ctx, root.ID, root.FolderID, "moved", bytes.NewReader([]byte("second")), vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	revs, err := fs.Revisions(ctx, root.ID, f.ID)
	if err != nil || len(revs) != 2 {
		t.Fatalf("Revisions = %d, %v; want 2", len(revs), err)
	}
	for i, want := range [][]byte{body(1), []byte("second")} { // oldest first
		if got := readAll(t, fs, root.ID, f.ID, revs[i].ID); !bytes.Equal(got, want) {
			t.Fatalf("revision %d holds %d bytes, want %d", i, len(got), len(want))
		}
	}
	lock, err := fs.Lock(ctx, root.ID, f.ID, vfs.LockRequest{Owner: "o", Duration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.Delete(ctx, root.ID, f.ID, vfs.WriteOptions{}); err == nil {
		t.Fatal("a locked file was deleted without its token")
	}
	if err := fs.Unlock(ctx, root.ID, f.ID, lock.Token); err != nil {
		t.Fatal(err)
	}
	if err := fs.Delete(ctx, root.ID, f.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.PurgeDeleted(ctx, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.GC(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := fs.Fsck(ctx, true)
	if err != nil || !rep.OK() {
		t.Fatalf("fsck: %v, %v", rep, err)
	}
}

func readAll(t *testing.T, fs *vfs.FS, root, id, rev uint64) []byte {
	t.Helper()
	f, err := fs.OpenRevision(context.Background(), root, id, rev)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// BenchmarkPropfindPostgres is the issue's "PROPFIND Depth 1 of 10,000
// files on PostgreSQL under 3 times Badger's": it builds a folder of
// BERTH_BENCH_PG_FILES files (default 10,000; a tenth with a dead
// property, as BenchmarkListingGrowth's) on each engine, then measures
// PROPFIND Depth 1 with named properties on each in the same run, and
// reports ms/req for each and their ratio, and on PostgreSQL the round
// trips to the database and the CPU time of its server per request.
//
//	cd bench && go test -run XXX -bench BenchmarkPropfindPostgres -benchtime 5x -v
func BenchmarkPropfindPostgres(b *testing.B) {
	n := 10000
	if v, err := strconv.Atoi(os.Getenv("BERTH_BENCH_PG_FILES")); err == nil && v > 0 {
		n = v
	}
	srv := pgtest.Start(b)
	const pw = "correct horse battery"
	named := `<D:propfind xmlns:D="DAV:"><D:prop><D:resourcetype/><D:getcontentlength/><D:getlastmodified/><D:getetag/></D:prop></D:propfind>`
	perReq := map[string]float64{}
	for _, engine := range []string{"badger", "postgres"} {
		var st *berthtest.Stack
		var db *postgres.DB
		if engine == "badger" {
			st = berthtest.New(b, berthtest.Options{})
		} else {
			st, db = pgStackDB(b, srv)
		}
		_, root, _ := st.AddPerson(b, "bench", pw)
		ws := httptest.NewUnstartedServer(webdav.New(webdav.Options{FS: st.FS, Accounts: st.Accounts}))
		ws.StartTLS()
		b.Cleanup(ws.Close)
		start := time.Now()
		buildFolder(b, st.FS, root, "big", n)
		b.Logf("%s: built a folder of %d files in %v", engine, n, time.Since(start).Round(time.Millisecond))
		b.Run(fmt.Sprintf("engine=%s/files=%d", engine, n), func(b *testing.B) {
			c := ws.Client()
			ops := 0
			var trips0 uint64
			if db != nil {
				trips0 = db.RoundTrips()
			}
			cpu0 := pgCPU(srv)
			start := time.Now()
			for b.Loop() {
				req, _ := http.NewRequest("PROPFIND", fmt.Sprintf("%s/webdav/%s/big/", ws.URL, root.Name), strings.NewReader(named))
				req.SetBasicAuth("bench", pw)
				req.Header.Set("Depth", "1")
				resp, err := c.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusMultiStatus {
					b.Fatalf("status %d", resp.StatusCode)
				}
				ops++
			}
			ms := float64(time.Since(start).Microseconds()) / 1000 / float64(ops)
			perReq[engine] = ms
			b.ReportMetric(ms, "ms/req")
			if db != nil {
				b.ReportMetric(float64(db.RoundTrips()-trips0)/float64(ops), "round_trips/req")
				b.ReportMetric(float64((pgCPU(srv)-cpu0).Microseconds())/1000/float64(ops), "postgres_cpu_ms/req")
			}
		})
	}
	if perReq["badger"] > 0 && perReq["postgres"] > 0 {
		b.Logf("PROPFIND Depth 1 of %d files: postgres %.1f ms, badger %.1f ms: %.2f times (target under 3)",
			n, perReq["postgres"], perReq["badger"], perReq["postgres"]/perReq["badger"])
	}
}

// BenchmarkUploadsPostgres is the metadata side of BenchmarkNodes/small,
// in one process and without S3 or HTTP: benchSmallFiles files of
// benchSmallSize bytes written by benchClients writers into one folder,
// on Badger, on PostgreSQL through one store ("pg1") and through two
// stores on one database, the writers spread over both, as two nodes'
// ("pg2"). It reports uploads/s, the tries that failed to serialize and
// ran again per upload, the uploads that gave up (kv.ErrConflict; sent
// again, as a client would after a 503), round trips and PostgreSQL's
// CPU per upload.
//
//	cd bench && go test -run XXX -bench BenchmarkUploadsPostgres -benchtime 1x -v
func BenchmarkUploadsPostgres(b *testing.B) {
	srv := pgtest.Start(b)
	for _, cfg := range []struct {
		name  string
		nodes int
	}{{"badger", 1}, {"pg1", 1}, {"pg2", 2}} {
		b.Run(cfg.name, func(b *testing.B) {
			for range b.N {
				var st *berthtest.Stack
				var dbs []*postgres.DB
				fss := []*vfs.FS{}
				if cfg.name == "badger" {
					st = berthtest.New(b, berthtest.Options{})
				} else {
					dsn := srv.NewDatabase(b)
					for i := range cfg.nodes {
						db, err := postgres.Open(context.Background(), postgres.Options{DSN: dsn})
						if err != nil {
							b.Fatal(err)
						}
						dbs = append(dbs, db)
						if i == 0 {
							st = berthtest.New(b, berthtest.Options{Store: db})
							continue
						}
						fs, err := vfs.Open(context.Background(), db, st.Chunks, vfs.Options{})
						if err != nil {
							b.Fatal(err)
						}
						b.Cleanup(func() { fs.Close(); db.Close() })
						fss = append(fss, fs)
					}
				}
				fss = append([]*vfs.FS{st.FS}, fss...)
				_, root, _ := st.AddPerson(b, "bench", "correct horse battery")
				var retries0, trips0 uint64
				for _, db := range dbs {
					retries0 += db.Retries()
					trips0 += db.RoundTrips()
				}
				cpu0 := pgCPU(srv)
				var gaveUp atomic.Int64
				ctx := context.Background()
				took := smallClients(b, func(w, i int) error {
					body := make([]byte, benchSmallSize)
					copy(body, fmt.Sprintf("%05d", i))
					for {
						_, err := fss[w%len(fss)].WriteFile(ctx, root.ID, root.FolderID, fmt.Sprintf("up-%05d.txt", i), bytes.NewReader(body), vfs.WriteOptions{})
						if !errors.Is(err, kv.ErrConflict) {
							return err
						}
						gaveUp.Add(1)
					}
				})
				var retries, trips uint64
				for _, db := range dbs {
					retries += db.Retries()
					trips += db.RoundTrips()
				}
				b.ReportMetric(benchSmallFiles/took.Seconds(), "uploads/s")
				b.ReportMetric(float64(gaveUp.Load()), "gave_up")
				if dbs != nil {
					b.ReportMetric(float64(retries-retries0)/benchSmallFiles, "retries/upload")
					b.ReportMetric(float64(trips-trips0)/benchSmallFiles, "round_trips/upload")
					b.ReportMetric(float64((pgCPU(srv)-cpu0).Microseconds())/1000/benchSmallFiles, "postgres_cpu_ms/upload")
				}
			}
		})
	}
}
