package rest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"berth/account"
	"berth/agentlink"
	"berth/berthtest"
	"berth/kv"
	"berth/vfs"
)

// TestAgentChannelEndsOnRevocation: the agent's channel is one request
// held open, authenticated once; what ends its session (signed out, its
// person disabled or given a new password, its machine deleted) ends it
// at the next command, which does not reach the agent, although only
// file writes come between the revocation and the command. The call
// fails as for an agent that is not connected. The access token it was
// opened with expiring ends nothing: the agent refreshes its own.
func TestAgentChannelEndsOnRevocation(t *testing.T) {
	ctx := context.Background()
	clk := berthtest.NewClock(time.Now())
	rows := []struct {
		name   string
		revoke func(t *testing.T, f *fixture, toks account.Tokens)
		ends   bool
	}{
		{"the access token expired", func(*testing.T, *fixture, account.Tokens) { clk.Add(2 * time.Hour) }, false},
		{"session signed out", func(t *testing.T, f *fixture, toks account.Tokens) {
			if err := f.accounts.Revoke(ctx, toks.RefreshToken); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"person disabled", func(t *testing.T, f *fixture, _ account.Tokens) {
			if _, err := f.accounts.UpdatePerson(ctx, f.person.ID, func(p *account.Person) error { p.Active = false; return nil }); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"password changed", func(t *testing.T, f *fixture, _ account.Tokens) {
			if err := f.accounts.SetPassword(ctx, f.person.ID, "another correct horse"); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"machine deleted", func(t *testing.T, f *fixture, toks account.Tokens) {
			if err := f.accounts.DeleteMachine(ctx, toks.MachineID); err != nil {
				t.Fatal(err)
			}
		}, true},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			f := newFixtureWith(t, fixtureOptions{Accounts: account.Options{Now: clk.Now}})
			_, bobRoot, _ := f.addPerson("bob")
			hub, srv, m := f.agentServer(t, "agent-guid")
			toks, err := f.accounts.IssueTokens(ctx, f.person.ID, m.ID)
			if err != nil {
				t.Fatal(err)
			}
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			req, _ := http.NewRequestWithContext(cctx, "GET", srv.URL+"/api/2/agent/channel", nil)
			req.Header.Set("Authorization", "Bearer "+toks.AccessToken)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("channel: %d", resp.StatusCode)
			}
			lines := make(chan string, 16) // a ping after the test stops reading blocks nothing
			go func() {
				defer close(lines)
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
					lines <- sc.Text()
				}
			}()
			if l := <-lines; !strings.Contains(l, `"op":"hello"`) {
				t.Fatalf("the channel opened with %q", l)
			}
			// A command before the revocation reaches the agent, which
			// answers it.
			called := make(chan error, 1)
			go func() { called <- hub.Call(ctx, m.ID, "status", nil, nil) }()
			var cmd agentlink.Command
			if err := json.Unmarshal([]byte(<-lines), &cmd); err != nil || cmd.Op != "status" {
				t.Fatalf("the first command: %+v, %v", cmd, err)
			}
			rr, err := http.NewRequest("POST", srv.URL+"/api/2/agent/reply/"+cmd.ID, strings.NewReader(`{"result":{}}`))
			if err != nil {
				t.Fatal(err)
			}
			rr.Header.Set("Content-Type", "application/json")
			rr.Header.Set("Authorization", "Bearer "+toks.AccessToken)
			if st, body := f.readAll(mustDo(t, srv.Client(), rr)); st != http.StatusOK {
				t.Fatalf("the agent's reply: %d %s", st, body)
			}
			if err := <-called; err != nil {
				t.Fatalf("the call before the revocation: %v", err)
			}

			writes := func() {
				t.Helper()
				meta := kv.MetaGeneration(f.db)
				for i := range 2 {
					if _, err := f.fs.WriteFile(ctx, bobRoot.ID, bobRoot.FolderID, "f.txt", strings.NewReader(strings.Repeat("x", i+1)), vfs.WriteOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				if got := kv.MetaGeneration(f.db); got != meta {
					t.Fatalf("file writes moved MetaGeneration from %d to %d", meta, got)
				}
			}
			writes()
			row.revoke(t, f, toks)
			writes()

			cctx2, cancel2 := context.WithTimeout(ctx, 10*time.Second)
			defer cancel2()
			go func() { called <- hub.Call(cctx2, m.ID, "ls", map[string]string{"path": "/secret"}, nil) }()
			select {
			case l, ok := <-lines:
				if ok && row.ends {
					t.Fatalf("a command reached the agent after its session ended: %q", l)
				}
				if !ok && !row.ends {
					t.Fatal("the channel ended")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the channel neither ended nor carried the command")
			}
			if !row.ends {
				cancel2()
				return
			}
			if err := <-called; !errors.Is(err, agentlink.ErrOffline) {
				t.Fatalf("the call after the revocation: %v, want %v", err, agentlink.ErrOffline)
			}
		})
	}
}

// TestAgentReplyUnread: an answer the agent channel has no call waiting
// for is refused before its body is read. Before, any signed-in client
// with a machine's token could have the server read up to maxReply
// bytes of JSON per request for a call id that named nothing; a body
// that stalls here is answered at once, 404.
func TestAgentReplyUnread(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	hub, srv, m := f.agentServer(t, "agent-guid")
	toks, err := f.accounts.IssueTokens(ctx, f.person.ID, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := hub.Attach(ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer hub.Detach(conn)
	for _, tc := range []struct {
		name, call string
	}{
		{"a call id that names nothing", "nothing"},
		{"another machine's call id", "1." + strconv.FormatUint(m.ID+1, 36)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr, pw := io.Pipe()
			defer pw.Close()
			go pw.Write([]byte(`{"result":"` + strings.Repeat("x", 64<<10)))
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(rctx, "POST", srv.URL+"/api/2/agent/reply/"+tc.call, pr)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+toks.AccessToken)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatalf("no answer while the body was still coming: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Fatalf("status %d, want 404", resp.StatusCode)
			}
		})
	}
}

// mustDo sends req with c, failing the test when it cannot.
func mustDo(t *testing.T, c *http.Client, req *http.Request) *http.Response {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// agentServer serves f's stores over HTTPS (HTTP/2, as agents connect)
// with an agent hub, and makes a machine of f's person with guid.
func (f *fixture) agentServer(t *testing.T, guid string) (*agentlink.Hub, *httptest.Server, account.Machine) {
	t.Helper()
	hub := agentlink.New()
	srv := httptest.NewUnstartedServer(New(Options{FS: f.fs, Accounts: f.accounts, Agents: hub}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	m, err := f.accounts.UpsertMachine(context.Background(), f.person.ID, account.MachineInput{GUID: guid})
	if err != nil {
		t.Fatal(err)
	}
	return hub, srv, m
}
