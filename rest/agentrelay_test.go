package rest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"berth/account"
	"berth/agentlink"
)

const relaySecret = "a-cluster-secret-of-the-test"

// relayNode is one node of a two-node cluster over the fixture's stores:
// its own rest server and Hub.
type relayNode struct {
	srv *httptest.Server
	hub *agentlink.Hub
}

// newRelayNodes starts two nodes on f's stores, relaying to each other
// over HTTPS with secret (each trusts both nodes' certificates).
func newRelayNodes(t *testing.T, f *fixture, secret string) (a, b *relayNode) {
	t.Helper()
	pool := x509.NewCertPool()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	nodes := make([]*relayNode, 2)
	for i := range nodes {
		srv := httptest.NewUnstartedServer(nil)
		hub := agentlink.NewCluster(agentlink.Cluster{Store: f.db, Node: fmt.Sprint("node", i), URL: "https://" + srv.Listener.Addr().String(),
			Forward: agentlink.HTTPForwarder{Client: client, Secret: secret}})
		srv.Config.Handler = New(Options{FS: f.fs, Accounts: f.accounts, Agents: hub, ClusterSecret: secret})
		srv.EnableHTTP2 = true
		srv.StartTLS()
		t.Cleanup(srv.Close)
		pool.AddCert(srv.Certificate())
		nodes[i] = &relayNode{srv: srv, hub: hub}
	}
	return nodes[0], nodes[1]
}

// do sends a request to n as f's person (token) with header.
func (n *relayNode) do(t *testing.T, f *fixture, method, path, token string, body string, header http.Header) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, n.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := n.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return f.readAll(resp)
}

// TestRelayThroughOtherNode: an agent connected to node A answers the
// machine routes asked of node B, over the relay route and HTTPS; once
// it goes, B answers 503 at once.
func TestRelayThroughOtherNode(t *testing.T) {
	f := newFixture(t)
	a, b := newRelayNodes(t, f, relaySecret)
	ctx := context.Background()
	m, err := f.accounts.UpsertMachine(ctx, f.person.ID, account.MachineInput{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.accounts.SetFileServer(ctx, m.ID, true); err != nil {
		t.Fatal(err)
	}
	if _, err := f.accounts.UpdatePolicy(ctx, f.org.ID, func(p *account.Policy) error { p.FileServerEnabled = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if st, body := f.postForm(fmt.Sprintf("/api/2/machine/%d/mappings/create", m.ID), url.Values{"path": {"/home/a/docs"}, "root_id": {fmt.Sprint(f.root.ID)}}); st != 200 {
		t.Fatalf("mapping: %d %s", st, body)
	}
	conn, err := a.hub.Attach(ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	notices := make(chan string, 4)
	go func() {
		for {
			select {
			case <-conn.Gone():
				return
			case cmd := <-conn.Commands():
				switch cmd.Op {
				case "status":
					a.hub.Reply(m.ID, cmd.ID, agentlink.Reply{Result: json.RawMessage(`{"synced":true}`)})
				case "ls":
					a.hub.Reply(m.ID, cmd.ID, agentlink.Reply{Result: json.RawMessage(`{"names":["x.txt"]}`)})
				default:
					notices <- cmd.Op
				}
			}
		}
	}()
	status := fmt.Sprintf("/api/2/machine/%d/status", m.ID)
	if st, body := b.do(t, f, http.MethodGet, status, f.token, "", nil); st != 200 || !strings.Contains(string(body), `"synced":true`) {
		t.Fatalf("status through B: %d %s", st, body)
	}
	form := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	if st, body := b.do(t, f, http.MethodPost, fmt.Sprintf("/api/2/machine/%d/ls", m.ID), f.token, "path=/home/a/docs", form); st != 200 || !strings.Contains(string(body), `"x.txt"`) {
		t.Fatalf("ls through B: %d %s", st, body)
	}
	// A backup created through B tells the agent on A to reconfigure.
	if st, body := b.do(t, f, http.MethodPost, fmt.Sprintf("/api/2/machine/%d/backups/create", m.ID), f.token, "path=/home/a/backup", form); st != 200 {
		t.Fatalf("backup through B: %d %s", st, body)
	}
	if op := <-notices; op != "reconfigure" {
		t.Fatalf("notice = %q", op)
	}
	a.hub.Detach(conn)
	st, body := b.do(t, f, http.MethodGet, status, f.token, "", nil)
	wantError(t, st, body, http.StatusServiceUnavailable, "temporarily_unavailable")
}

// TestRelayRouteRefusals: the relay route takes the cluster secret and
// nothing else: no token of any person, no wrong secret, nothing on a
// node without one. With it, a machine not connected there is offline.
func TestRelayRouteRefusals(t *testing.T) {
	f := newFixture(t)
	a, _ := newRelayNodes(t, f, relaySecret)
	_, _, otherTok := f.addPerson("root")
	path := agentlink.RelayPath + "7"
	cases := []struct {
		name   string
		node   string // "" a, "lone" the fixture's own server (no secret)
		token  string
		secret string
		body   string
		want   int
		code   string
		answer string
	}{
		{name: "no secret, no token", want: 403, code: "forbidden"},
		{name: "a person's token", token: f.token, want: 403, code: "forbidden"},
		{name: "another person's token", token: otherTok, want: 403, code: "forbidden"},
		{name: "a wrong secret", secret: "not-the-secret", want: 403, code: "forbidden"},
		{name: "the secret with a suffix", secret: relaySecret + "x", want: 403, code: "forbidden"},
		{name: "a node without a secret", node: "lone", secret: relaySecret, want: 403, code: "forbidden"},
		{name: "a bad body", secret: relaySecret, body: "op=status", want: 400, code: "invalid_request"},
		{name: "no op", secret: relaySecret, body: `{}`, want: 400, code: "invalid_request"},
		{name: "a machine not connected here", secret: relaySecret, body: `{"op":"status"}`, want: 200, answer: `{"failure":"offline"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{"Content-Type": {"application/json"}}
			if tc.secret != "" {
				h.Set(agentlink.SecretHeader, tc.secret)
			}
			body := tc.body
			if body == "" {
				body = `{"op":"status"}`
			}
			var st int
			var got []byte
			if tc.node == "lone" {
				st, got = f.readAll(f.request(http.MethodPost, path, tc.token, strings.NewReader(body), h))
			} else {
				st, got = a.do(t, f, http.MethodPost, path, tc.token, body, h)
			}
			if tc.code != "" {
				wantError(t, st, got, tc.want, tc.code)
				return
			}
			if st != tc.want || strings.TrimSpace(string(got)) != tc.answer {
				t.Fatalf("got %d %s, want %d %s", st, got, tc.want, tc.answer)
			}
		})
	}
	if !strings.Contains(f.logs.String(), "no cluster secret") {
		t.Error("a relayed call refused for want of a secret was not logged")
	}
	// The route takes no token: anyone who reaches it wrote a warning
	// with each call. One a minute now, with how many were held back.
	for range 50 {
		f.readAll(f.request(http.MethodPost, path, "", strings.NewReader(`{"op":"status"}`), http.Header{"Content-Type": {"application/json"}}))
	}
	if n := strings.Count(f.logs.String(), "refused a relayed agent call"); n > 1 {
		t.Errorf("%d warnings for 51 refused relayed calls within a minute", n)
	}
}
