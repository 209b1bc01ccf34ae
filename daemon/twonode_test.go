package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth/berthtest"
	"berth/kv/postgres/pgtest"
	"berth/vfs/chunk/s3/s3test"
)

// twoNodes is a cluster of two real berth processes on one PostgreSQL
// database and one S3 bucket, each with a data directory of its own (its
// TLS certificate and format marker: nothing else is kept there).
type twoNodes struct {
	bin        string
	env        []string // what both nodes, fsck and gc share
	dataA      string
	dataB      string
	a, b       *daemonProc
	ca, cb     *lcClient
	gcInterval string
	// relay, when set, is the nodes' cluster settings (relay_test.go):
	// each node's certificate, advertised URL and the shared secret.
	relay *relayCluster
}

// clusterPassword is the first administrator's password, from the
// configuration so that both nodes agree on it whichever starts first.
const clusterPassword = "two-nodes-share-one-store"

// startTwoNodes starts PostgreSQL, versitygw and two nodes: A collects
// garbage every gcInterval (0s: never), B never does. It skips without
// PostgreSQL or versitygw (fails under BERTH_INTEROP=required).
func startTwoNodes(t *testing.T, gcInterval string) *twoNodes {
	t.Helper()
	return startCluster(t, gcInterval, false)
}

// startCluster is startTwoNodes, with the nodes relaying agents' calls
// to each other when relay is set (relay_test.go), and env (KEY=value)
// given to both.
func startCluster(t *testing.T, gcInterval string, relay bool, env ...string) *twoNodes {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the real binary, PostgreSQL and versitygw")
	}
	pg := pgtest.Start(t)
	dsn := pg.NewDatabase(t)
	s3 := s3test.Start(t)
	bucket := s3.Bucket(t)
	n := &twoNodes{
		bin:        berthtest.BuildBerth(t),
		env:        append(s3.Env(bucket), "BERTH_METADATA_BACKEND=postgres", "BERTH_METADATA_POSTGRES_DSN="+dsn, "BERTH_ADMIN_PASSWORD="+clusterPassword),
		dataA:      filepath.Join(t.TempDir(), "a"),
		dataB:      filepath.Join(t.TempDir(), "b"),
		gcInterval: gcInterval,
	}
	n.env = append(n.env, env...)
	// A first: the first run (organization, administrator) is done by the
	// first node to start; B then finds it done.
	var envA, envB, argsA, argsB []string
	if relay {
		n.relay = newRelayCluster(t)
		envA, argsA = n.relay.node(0)
		envB, argsB = n.relay.node(1)
	}
	n.a = startDaemonEnv(t, n.bin, n.dataA, append(envA, n.env...), append(argsA, "--gc-interval", gcInterval)...)
	n.ca = n.client(t, n.a, n.dataA)
	n.b = startDaemonEnv(t, n.bin, n.dataB, append(envB, n.env...), argsB...)
	n.cb = n.client(t, n.b, n.dataB)
	return n
}

// client logs in on node p, whose certificate is in data.
func (n *twoNodes) client(t *testing.T, p *daemonProc, data string) *lcClient {
	t.Helper()
	trust := filepath.Join(data, "tls", "cert.pem")
	if n.relay != nil {
		trust = n.relay.caFile
	}
	return loginAs(t, p, trust, clusterPassword)
}

// fsck runs `berth fsck --verify` on the cluster's stores (no node may
// be running: fsck reads a quiet store).
func (n *twoNodes) fsck(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(n.bin, "fsck", "--verify", "--data", filepath.Join(t.TempDir(), "fsck"))
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, n.env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("fsck --verify on PostgreSQL and S3: %v\n%s", err, out)
	}
	return string(out)
}

// listingHash returns the root listing's hash on lc, and the status a GET
// that passes hash gets (304 while nothing changed).
func listingHash(t *testing.T, lc *lcClient, hash string) (int, string) {
	t.Helper()
	path := fmt.Sprintf("/api/2/files/%d?include_children=true", lc.root)
	if hash != "" {
		path += "&hash=" + url.QueryEscape(hash)
	}
	status, body := lc.do(http.MethodGet, path, nil, "")
	if status == http.StatusNotModified {
		return status, hash
	}
	var root struct {
		Hash string `json:"hash"`
	}
	if status != 200 || json.Unmarshal(body, &root) != nil || root.Hash == "" {
		t.Fatalf("GET %s: %d %s", path, status, body)
	}
	return status, root.Hash
}

// TestTwoNodes drives two berth processes on one PostgreSQL database and
// one S3 bucket, alternating requests between them: what one node does
// the other sees at once, locks hold across nodes, a collection on one
// loses nothing of an upload on the other, and one node killed mid-upload
// leaves the other serving and the stores consistent.
func TestTwoNodes(t *testing.T) {
	n := startTwoNodes(t, "200ms")
	a, b := n.ca, n.cb

	t.Run("upload on A reads byte-identical on B", func(t *testing.T) {
		body := content(1, 3<<20+17)
		if st, err := a.upload("one.bin", body, false); err != nil || st != 200 {
			t.Fatalf("upload on A: %d %v", st, err)
		}
		st, got := b.read("one.bin")
		if st != 200 || !bytes.Equal(got, body) {
			t.Fatalf("read on B: %d, %d bytes, equal %v", st, len(got), bytes.Equal(got, body))
		}
		// And back: B writes, A reads; a token from A serves on B.
		body2 := content(2, 64<<10)
		if st, err := b.upload("two.bin", body2, true); err != nil || st != 201 {
			t.Fatalf("PUT on B: %d %v", st, err)
		}
		if st, got := a.read("two.bin"); st != 200 || !bytes.Equal(got, body2) {
			t.Fatalf("read on A: %d, equal %v", st, bytes.Equal(got, body2))
		}
		// Each node's health check (what the load balancer asks).
		for _, p := range []*daemonProc{n.a, n.b} {
			resp, err := http.Get("http://" + p.addrs["metrics"] + "/health")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("GET /health: %d", resp.StatusCode)
			}
		}
		// A's S3 requests show in its metrics.
		if st, m := get(t, http.DefaultClient, "http://"+n.a.addrs["metrics"]+"/metrics"); st != 200 || !strings.Contains(m, `berth_chunk_store_request_duration_seconds_count{op="put"}`) {
			t.Fatalf("A's metrics lack the S3 puts: %d", st)
		}
		shared := *b
		shared.token = a.token
		if st, _ := shared.do(http.MethodGet, "/api/2/person", nil, ""); st != 200 {
			t.Fatalf("A's token on B: %d", st)
		}
	})

	t.Run("rename on A seen at once on B", func(t *testing.T) {
		_, h := listingHash(t, b, "")
		if st, _ := listingHash(t, b, h); st != http.StatusNotModified {
			t.Fatalf("unchanged listing on B: %d, want 304", st)
		}
		id := a.fileID("one.bin")
		st, body := a.do(http.MethodPost, fmt.Sprintf("/api/2/files/%d/%d/rename", a.root, id),
			strings.NewReader(url.Values{"name": {"renamed.bin"}}.Encode()), "application/x-www-form-urlencoded")
		if st != 200 {
			t.Fatalf("rename on A: %d %s", st, body)
		}
		st, h2 := listingHash(t, b, h)
		if st != 200 || h2 == h {
			t.Fatalf("listing on B after the rename on A: %d, hash changed %v (want 200 and a new hash)", st, h2 != h)
		}
		files, _ := b.listing()
		if _, ok := files["renamed.bin"]; !ok {
			t.Fatalf("B's listing lacks renamed.bin: %v", files)
		}
		if _, ok := files["one.bin"]; ok {
			t.Fatalf("B's listing still has one.bin: %v", files)
		}
	})

	t.Run("LOCK on A refuses PUT on B with 423", func(t *testing.T) {
		lockBody := `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>`
		st, resp, err := a.dav("LOCK", "two.bin", strings.NewReader(lockBody), "Timeout", "Second-60")
		if err != nil || st != 200 {
			t.Fatalf("LOCK on A: %d %v %s", st, err, resp)
		}
		token := lockToken(t, resp)
		if st, err := b.upload("two.bin", []byte("overwrite"), true); err != nil || st != http.StatusLocked {
			t.Fatalf("PUT on B of a file locked on A: %d %v, want 423", st, err)
		}
		// With the token, B takes the write: the lock is the cluster's.
		st, _, err = b.dav(http.MethodPut, "two.bin", strings.NewReader("with the token"), "If", "(<"+token+">)")
		if err != nil || (st != 204 && st != 201) {
			t.Fatalf("PUT on B with A's lock token: %d %v", st, err)
		}
		if st, _, err := b.dav("UNLOCK", "two.bin", nil, "Lock-Token", "<"+token+">"); err != nil || st != 204 {
			t.Fatalf("UNLOCK on B of A's lock: %d %v", st, err)
		}
		if st, err := a.upload("two.bin", []byte("unlocked"), true); err != nil || st != 204 {
			t.Fatalf("PUT on A after the unlock on B: %d %v", st, err)
		}
	})

	t.Run("collection on A during an upload on B loses nothing", func(t *testing.T) {
		// Garbage for A to find: files written and deleted.
		for i := range 3 {
			name := fmt.Sprintf("garbage%d.bin", i)
			if st, err := a.upload(name, content(uint64(100+i), 256<<10), true); err != nil || st != 201 {
				t.Fatalf("PUT %s: %d %v", name, st, err)
			}
			if st, _, err := b.dav(http.MethodDelete, name, nil); err != nil || st != 204 {
				t.Fatalf("DELETE %s on B: %d %v", name, st, err)
			}
		}
		before := strings.Count(n.a.stderr(), `"msg":"chunk gc"`)
		body := content(3, 4<<20)
		// Over some seconds, while A collects every 200ms.
		if st, err := b.slowUpload("during-gc.bin", body, 4*time.Second, true); err != nil || st != 201 {
			t.Fatalf("slow PUT on B: %d %v", st, err)
		}
		if runs := strings.Count(n.a.stderr(), `"msg":"chunk gc"`) - before; runs < 2 {
			t.Fatalf("A collected %d times during B's upload, want several:\n%s", runs, n.a.stderr())
		}
		for _, c := range []*lcClient{a, b} {
			if st, got := c.read("during-gc.bin"); st != 200 || !bytes.Equal(got, body) {
				t.Fatalf("read on %s after the collection: %d, equal %v", c.base, st, bytes.Equal(got, body))
			}
		}
	})

	t.Run("B killed mid-upload, A keeps serving, fsck clean", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := b.slowUploadCtx(ctx, "killed.bin", content(4, 4<<20), 4*time.Second, false)
			done <- err
		}()
		time.Sleep(1500 * time.Millisecond)
		n.b.kill(t)
		if err := <-done; err == nil {
			t.Log("the upload on B finished before the kill")
		}
		for i := range 3 {
			body := content(uint64(200+i), 128<<10)
			name := fmt.Sprintf("after-kill%d.bin", i)
			if st, err := a.upload(name, body, false); err != nil || st != 200 {
				t.Fatalf("upload on A after B died: %d %v", st, err)
			}
			if st, got := a.read(name); st != 200 || !bytes.Equal(got, body) {
				t.Fatalf("read on A after B died: %d", st)
			}
		}
		if st, got := a.read("during-gc.bin"); st != 200 || len(got) != 4<<20 {
			t.Fatalf("read on A of B's earlier upload: %d", st)
		}
		n.a.stop(t)
		out := n.fsck(t)
		t.Logf("fsck: %s", out)
	})
}

// lockToken is the lock token of a LOCK's answer body resp.
func lockToken(t *testing.T, resp []byte) string {
	t.Helper()
	i := bytes.Index(resp, []byte("urn:uuid:"))
	if i < 0 || len(resp) < i+len("urn:uuid:")+36 {
		t.Fatalf("no lock token in %s", resp)
	}
	return string(resp[i : i+len("urn:uuid:")+36])
}
