package daemon

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"berth/agent/agenttest"
	"berth/agentlink"
	"berth/config"
	"berth/kv"
	"berth/kv/badger"
)

// relayCluster is the cluster settings of two nodes that relay agents'
// calls to each other: a cluster authority that signs each node's
// certificate (for 127.0.0.1), each node's fixed address (it is its
// advertised URL, so it is chosen before the node starts) and the secret.
type relayCluster struct {
	caFile, secretFile, secret string
	addrs, certs, keys         [2]string
}

// newRelayCluster writes the authority, the nodes' certificates and the
// secret to a temporary directory and picks the nodes' ports.
func newRelayCluster(t *testing.T) *relayCluster {
	t.Helper()
	dir := t.TempDir()
	r := &relayCluster{caFile: filepath.Join(dir, "ca.pem"), secretFile: filepath.Join(dir, "secret")}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "berth test cluster"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, r.caFile, caDER)
	ca, _ := x509.ParseCertificate(caDER)
	for i := range 2 {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(int64(10 + i)), Subject: pkix.Name{CommonName: fmt.Sprint("node", i)},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		r.certs[i], r.keys[i] = filepath.Join(dir, fmt.Sprint("node", i, ".pem")), filepath.Join(dir, fmt.Sprint("node", i, ".key"))
		writePEM(t, r.certs[i], der)
		kd, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(r.keys[i], pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), 0o600); err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		r.addrs[i] = ln.Addr().String()
		ln.Close()
	}
	var b [32]byte
	rand.Read(b[:])
	r.secret = hex.EncodeToString(b[:])
	if err := os.WriteFile(r.secretFile, []byte(r.secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return r
}

// node returns what node i adds to the cluster's environment, and its
// flags.
func (r *relayCluster) node(i int) (env, args []string) {
	return []string{
		"BERTH_TLS_CERT=" + r.certs[i], "BERTH_TLS_KEY=" + r.keys[i],
		"BERTH_CLUSTER_ADVERTISE_URL=https://" + r.addrs[i],
		"BERTH_CLUSTER_SECRET_FILE=" + r.secretFile, "BERTH_CLUSTER_CA_FILE=" + r.caFile,
	}, []string{"--listen", r.addrs[i]}
}

// waitStatus polls GET machine id's status on lc until it answers want;
// a failure logs the last answer.
func waitStatus(t *testing.T, lc *lcClient, id uint64, want int, within time.Duration) []byte {
	t.Helper()
	st := 0
	var body []byte
	defer func() {
		if st != want {
			t.Logf("status of machine %d on %s: %d %s, want %d", id, lc.base, st, body, want)
		}
	}()
	return waitFor(t, within, func() ([]byte, bool) {
		st, body = lc.do(http.MethodGet, fmt.Sprintf("/api/2/machine/%d/status", id), nil, "")
		return body, st == want
	})
}

// splitBalancer is a load balancer at its least sticky: it sends the
// agent's channel (and everything else) to node A and the agent's
// answers to node B. It serves HTTPS with node A's certificate (for
// 127.0.0.1, signed by the cluster's authority). It counts the answers
// it sent to B.
func splitBalancer(t *testing.T, n *twoNodes) (string, *atomic.Int64) {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(n.relay.certs[0], n.relay.keys[0])
	if err != nil {
		t.Fatal(err)
	}
	a, _ := url.Parse(n.ca.base)
	b, _ := url.Parse(n.cb.base)
	answers := new(atomic.Int64)
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			to := a
			if strings.HasPrefix(r.In.URL.Path, "/api/2/agent/reply/") {
				to = b
				answers.Add(1)
			}
			r.SetURL(to)
			r.Out.Host = r.In.Host
		},
		Transport:     n.ca.c.Transport,
		FlushInterval: -1, // the channel's lines as they come
	}
	srv := httptest.NewUnstartedServer(proxy)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL, answers
}

// TestRelayAcrossNodes: a real `berth agent` connected to node A answers
// machine status and ls asked of node B (relayed over HTTPS, the nodes'
// certificates checked against the cluster's authority, with the
// cluster secret), its answers reaching B through a balancer with no
// sticky routing; the relay route refuses a missing or wrong secret and
// every person's token; once the agent stops, B answers 503.
func TestRelayAcrossNodes(t *testing.T) {
	n := startCluster(t, "0s", true)
	a, b := n.ca, n.cb
	lb, answers := splitBalancer(t, n)
	// The agent signs in as the cluster's administrator, through the
	// balancer, trusting the cluster's authority.
	admin := agenttest.Person{Login: "admin", Password: clusterPassword, Token: a.token}
	ag := agenttest.Connect(t, lb, n.relay.caFile, n.bin).NewAgent(t, admin)
	if err := os.WriteFile(ag.Path("hello.txt"), []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	ag.Start(t)
	id := ag.WaitOnline(t)

	t.Run("status and ls through A and B", func(t *testing.T) {
		// Asked of A, the holder: the call waits there, the answer
		// reaches B and is relayed back.
		waitStatus(t, a, id, 200, 0)
		start := time.Now()
		body := waitStatus(t, b, id, 200, 0)
		t.Logf("status through B in %v", time.Since(start))
		var st struct {
			Results struct {
				Subscriptions []any `json:"subscriptions"`
			} `json:"results"`
		}
		if err := json.Unmarshal(body, &st); err != nil || st.Results.Subscriptions == nil {
			t.Fatalf("status through B: %s", body)
		}
		// A backup created through B: its notice reaches the agent on
		// A, and the folder may be listed.
		folder := ag.Path()
		form := "application/x-www-form-urlencoded"
		if code, body := b.do(http.MethodPost, fmt.Sprintf("/api/2/machine/%d/backups/create", id), strings.NewReader(url.Values{"path": {folder}}.Encode()), form); code != 200 {
			t.Fatalf("backup through B: %d %s", code, body)
		}
		// The agent takes the folder once the notice made it read its
		// backups again; until then it refuses to list it (403).
		waitFor(t, 15*time.Second, func() (struct{}, bool) {
			code, body := b.do(http.MethodPost, fmt.Sprintf("/api/2/machine/%d/ls", id), strings.NewReader(url.Values{"path": {folder}}.Encode()), form)
			listed := code == 200 && strings.Contains(string(body), `"hello.txt"`)
			if !listed && code != http.StatusForbidden {
				t.Fatalf("ls through B: %d %s", code, body)
			}
			return struct{}{}, listed
		})
		if answers.Load() == 0 {
			t.Fatal("no answer of the agent went through B")
		}
	})

	t.Run("the relay route takes the secret only", func(t *testing.T) {
		relay := fmt.Sprintf("%s%s%d", a.base, agentlink.RelayPath, id)
		cases := []struct {
			name   string
			token  string
			secret string
			want   int
		}{
			{name: "no secret, no token", want: 403},
			{name: "the administrator's token", token: a.token, want: 403},
			{name: "a wrong secret", secret: strings.Repeat("x", len(n.relay.secret)), want: 403},
			{name: "the secret", secret: n.relay.secret, want: 200},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				req, _ := http.NewRequest(http.MethodPost, relay, strings.NewReader(`{"op":"status"}`))
				req.Header.Set("Content-Type", "application/json")
				if tc.token != "" {
					req.Header.Set("Authorization", "Bearer "+tc.token)
				}
				if tc.secret != "" {
					req.Header.Set(agentlink.SecretHeader, tc.secret)
				}
				resp, err := a.c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				var ans agentlink.RelayAnswer
				json.NewDecoder(resp.Body).Decode(&ans)
				resp.Body.Close()
				if resp.StatusCode != tc.want || (tc.want == 200 && (ans.Failure != "" || len(ans.Result) == 0)) {
					t.Fatalf("relay route: %d %+v, want %d", resp.StatusCode, ans, tc.want)
				}
			})
		}
		if !strings.Contains(n.a.stderr(), "the cluster secret is missing or wrong") {
			t.Error("A did not log the refused relays")
		}
	})

	t.Run("B answers 503 once the agent stops", func(t *testing.T) {
		ag.Stop(t)
		waitStatus(t, b, id, http.StatusServiceUnavailable, 10*time.Second)
		start := time.Now()
		waitStatus(t, b, id, http.StatusServiceUnavailable, 0)
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("B took %v to answer an offline machine", d)
		}
	})
}

// sharedStore hides a Badger store's Exclusive, so agentHub takes it
// for a store other nodes share.
type sharedStore struct{ kv.Store }

// TestAgentHub: which hub a node gets from its store and cluster
// settings. A lone store, or a shared one without settings, gets a hub
// that records nothing (as before relays existed); a shared one with
// settings records its agents; bad settings fail the start.
func TestAgentHub(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	secret := write("secret", strings.Repeat("s", 40)+"\n")
	short := write("short", "too-short\n")
	notPEM := write("ca.pem", "not a certificate")
	ca := filepath.Join(dir, "real-ca.pem")
	writePEM(t, ca, selfSigned(t))
	set := config.Cluster{AdvertiseURL: "https://node-a:8443", SecretFile: secret, CAFile: ca}
	cases := []struct {
		name    string
		shared  bool
		cfg     config.Cluster
		records bool
		secret  bool
		err     string
	}{
		{name: "lone, no settings"},
		{name: "lone, settings ignored", cfg: set},
		{name: "shared, no settings", shared: true},
		{name: "shared, settings", shared: true, cfg: set, records: true, secret: true},
		{name: "shared, system authorities", shared: true, cfg: config.Cluster{AdvertiseURL: set.AdvertiseURL, SecretFile: secret}, records: true, secret: true},
		{name: "short secret", shared: true, cfg: config.Cluster{AdvertiseURL: set.AdvertiseURL, SecretFile: short}, err: "shorter than 32"},
		{name: "no certificate in ca_file", shared: true, cfg: config.Cluster{AdvertiseURL: set.AdvertiseURL, SecretFile: secret, CAFile: notPEM}, err: "no PEM certificate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db, err := badger.Open(badger.Options{InMemory: true})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var store kv.Store = db
			if tc.shared {
				store = sharedStore{db}
			}
			hub, got, err := agentHub(tc.cfg, store, "node-a/1/x", slog.New(slog.DiscardHandler))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("agentHub = %v, want an error with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (got != "") != tc.secret {
				t.Fatalf("secret %q, want one: %v", got, tc.secret)
			}
			ctx := context.Background()
			c, err := hub.Attach(ctx, 3)
			if err != nil {
				t.Fatal(err)
			}
			defer hub.Detach(c)
			records := 0
			db.View(ctx, func(tx kv.Txn) error {
				return tx.Scan([]byte(kv.AgentHolder), nil, func(k, v []byte) error {
					records++
					return nil
				})
			})
			if (records > 0) != tc.records {
				t.Fatalf("%d holder records, want some: %v", records, tc.records)
			}
		})
	}
}
