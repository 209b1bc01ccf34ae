package agentlink

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"berth/kv"
	"berth/kv/badger"
	"berth/kv/postgres"
	"berth/kv/postgres/pgtest"
)

// twoHubs is two nodes' Hubs on one store, each relaying to the other
// directly (Serve), as rest's relay route would over HTTPS.
type twoHubs struct {
	db   kv.Store
	a, b *Hub
	// down makes the node at that URL unreachable, as a dead node is.
	down map[string]bool
}

func newTwoHubs(t *testing.T) *twoHubs {
	t.Helper()
	db, err := badger.Open(badger.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return newTwoHubsOn(db, db)
}

// newTwoHubsPostgres is newTwoHubs with each node on a store of its own
// over one PostgreSQL database, as real nodes are: each takes ids from
// leases of its own.
func newTwoHubsPostgres(t *testing.T) *twoHubs {
	t.Helper()
	dsn := pgtest.Start(t).NewDatabase(t)
	var dbs [2]kv.Store
	for i := range dbs {
		db, err := postgres.Open(context.Background(), postgres.Options{DSN: dsn})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		dbs[i] = db
	}
	return newTwoHubsOn(dbs[0], dbs[1])
}

// newTwoHubsOn makes A's Hub on dbA and B's on dbB, one store or two
// over one database.
func newTwoHubsOn(dbA, dbB kv.Store) *twoHubs {
	db := dbA
	n := &twoHubs{db: db, down: map[string]bool{}}
	peers := map[string]**Hub{"https://a": &n.a, "https://b": &n.b}
	fwd := ForwarderFunc(func(ctx context.Context, url string, id uint64, req RelayRequest) (RelayAnswer, error) {
		if n.down[url] {
			return RelayAnswer{}, errors.New("connection refused")
		}
		return (*peers[url]).Serve(ctx, id, req), nil
	})
	n.a = NewCluster(Cluster{Store: dbA, Node: "a", URL: "https://a", Forward: fwd, TTL: 3 * time.Second})
	n.b = NewCluster(Cluster{Store: dbB, Node: "b", URL: "https://b", Forward: fwd, TTL: 3 * time.Second})
	return n
}

// holderOf returns the node recorded as holding machine id ("" none).
func (n *twoHubs) holderOf(t *testing.T, id uint64) string {
	t.Helper()
	var rec holder
	var ok bool
	err := n.db.View(context.Background(), func(tx kv.Txn) error {
		var err error
		rec, ok, err = readHolder(tx, id)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return ""
	}
	return rec.Node
}

// TestRelayedCall: a call, an agent's error, a notice and a timeout of
// an agent connected to A, asked through B, come back as if asked of A;
// once the agent goes, B answers offline at once.
func TestRelayedCall(t *testing.T) {
	n := newTwoHubs(t)
	c := attach(t, n.a, 9)
	if got := n.holderOf(t, 9); got != "a" {
		t.Fatalf("holder = %q, want a", got)
	}
	notices := make(chan Command, 1)
	go func() {
		for {
			select {
			case <-c.Gone():
				return
			case cmd := <-c.Commands():
				var args struct{ Path string }
				json.Unmarshal(cmd.Args, &args)
				switch {
				case cmd.ID == "":
					notices <- cmd
				case cmd.Op == "silent":
				case args.Path == "/secret":
					n.a.Reply(9, cmd.ID, Reply{Error: &AgentError{Code: "forbidden", Description: "outside the mapped folders"}})
				default:
					n.a.Reply(9, cmd.ID, Reply{Result: json.RawMessage(`{"names":["` + cmd.Op + args.Path + `"]}`)})
				}
			}
		}
	}()
	cases := []struct {
		name    string
		op      string
		path    string
		want    string
		wantErr error
	}{
		{name: "answered", op: "ls", path: "/docs", want: "ls/docs"},
		{name: "the agent's error", op: "ls", path: "/secret", wantErr: &AgentError{}},
		{name: "the agent is silent", op: "silent", wantErr: ErrTimeout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			var out struct{ Names []string }
			err := n.b.Call(ctx, 9, tc.op, map[string]string{"path": tc.path}, &out)
			var ae *AgentError
			switch {
			case tc.wantErr == nil && (err != nil || len(out.Names) != 1 || out.Names[0] != tc.want):
				t.Fatalf("Call through B = %v, %v; want %s", err, out.Names, tc.want)
			case errors.As(tc.wantErr, &ae) && (!errors.As(err, &ae) || ae.Code != "forbidden"):
				t.Fatalf("Call through B = %v; want the agent's forbidden", err)
			case tc.wantErr != nil && ae == nil && !errors.Is(err, tc.wantErr):
				t.Fatalf("Call through B = %v; want %v", err, tc.wantErr)
			}
		})
	}
	if err := n.b.Notify(9, "reconfigure", nil); err != nil {
		t.Fatal(err)
	}
	select {
	case cmd := <-notices:
		if cmd.Op != "reconfigure" {
			t.Fatalf("notice = %+v", cmd)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the notice sent through B did not reach the agent on A")
	}

	n.a.Detach(c)
	if got := n.holderOf(t, 9); got != "" {
		t.Fatalf("holder after the agent went = %q, want none", got)
	}
	start := time.Now()
	if err := n.b.Call(context.Background(), 9, "status", nil, nil); !errors.Is(err, ErrOffline) || time.Since(start) > time.Second {
		t.Fatalf("Call through B after the agent went = %v after %v; want ErrOffline at once", err, time.Since(start))
	}
}

// staleOnA leaves a record of machine 9 on A that A no longer holds.
func staleOnA(t *testing.T, n *twoHubs) {
	attach(t, n.a, 9)
	n.a.mu.Lock()
	delete(n.a.conns, 9)
	n.a.mu.Unlock()
}

// TestRelayOffline: every way a machine is offline from a node that does
// not hold it answers ErrOffline at once.
func TestRelayOffline(t *testing.T) {
	cases := []struct {
		name  string
		setUp func(t *testing.T, n *twoHubs)
		ask   func(n *twoHubs) *Hub
	}{
		{name: "never connected", setUp: func(*testing.T, *twoHubs) {}, ask: func(n *twoHubs) *Hub { return n.b }},
		{name: "the holder is down", setUp: func(t *testing.T, n *twoHubs) {
			attach(t, n.a, 9)
			n.down["https://a"] = true
		}, ask: func(n *twoHubs) *Hub { return n.b }},
		// A record A left behind (a Detach whose write failed): A checks
		// its own connections and answers offline, asked by B or itself.
		{name: "the holder no longer holds it", setUp: staleOnA, ask: func(n *twoHubs) *Hub { return n.b }},
		{name: "this node's own stale record", setUp: staleOnA, ask: func(n *twoHubs) *Hub { return n.a }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := newTwoHubs(t)
			tc.setUp(t, n)
			start := time.Now()
			err := tc.ask(n).Call(context.Background(), 9, "status", nil, nil)
			if !errors.Is(err, ErrOffline) || time.Since(start) > time.Second {
				t.Fatalf("Call = %v after %v; want ErrOffline at once", err, time.Since(start))
			}
			if err := tc.ask(n).Notify(9, "reconfigure", nil); err != nil {
				t.Fatalf("Notify = %v", err)
			}
		})
	}
}

// TestNewerConnectionOnAnotherNode: an agent that reconnects to B while
// its old request on A has not ended yet is B's: the record names B, A's
// late Detach leaves it, and A's renewal closes A's stale connection, so
// calls through A go to B.
func TestNewerConnectionOnAnotherNode(t *testing.T) {
	n := newTwoHubs(t)
	old := attach(t, n.a, 5)
	cur := attach(t, n.b, 5)
	if got := n.holderOf(t, 5); got != "b" {
		t.Fatalf("holder = %q, want b", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go n.a.Run(ctx)
	go n.b.Run(ctx)
	select {
	case <-old.Gone():
	case <-time.After(5 * time.Second):
		t.Fatal("A's stale connection is still open after a renewal")
	}
	n.a.Detach(old)
	if got := n.holderOf(t, 5); got != "b" {
		t.Fatalf("holder after A's stale connection ended = %q, want b", got)
	}
	go agentLoop(n.b, 5, cur, func(Command) Reply { return Reply{Result: json.RawMessage(`{"synced":true}`)} })
	var st struct{ Synced bool }
	if err := n.a.Call(context.Background(), 5, "status", nil, &st); err != nil || !st.Synced {
		t.Fatalf("Call through A = %v, %+v", err, st)
	}
	// The record outlives its TTL while B renews it.
	time.Sleep(4 * time.Second)
	if got := n.holderOf(t, 5); got != "b" {
		t.Fatalf("holder after a TTL of renewals = %q, want b", got)
	}
	n.b.Detach(cur)
}

// TestReconnectAcrossNodesOnPostgres: an agent that reconnects, from A
// to B and back to A while B still records its connection (a half-open
// one B has not yet found dead), is taken on A, whose store hands out
// ids from a lease below B's: the connection's generation is ordered
// across nodes, not by each node's leases.
func TestReconnectAcrossNodesOnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	n := newTwoHubsPostgres(t)
	first := attach(t, n.a, 9)
	n.a.Detach(first)
	onB := attach(t, n.b, 9)
	back, err := n.a.Attach(context.Background(), 9)
	if err != nil {
		t.Fatalf("the agent's newer connection on A: %v, want it taken (B's is older)", err)
	}
	if got := n.holderOf(t, 9); got != "a" {
		t.Fatalf("holder = %q, want a", got)
	}
	// B's stale connection, once it ends, leaves A's record alone.
	n.b.Detach(onB)
	if got := n.holderOf(t, 9); got != "a" {
		t.Fatalf("holder after B's stale connection ended = %q, want a", got)
	}
	n.a.Detach(back)
}

// TestLoneHubRecordsNothing: a Hub of New (one node, Badger) writes
// nothing to any store and relays nothing.
func TestLoneHubRecordsNothing(t *testing.T) {
	h := New()
	c := attach(t, h, 1)
	if h.cluster != nil || c.gen != 0 {
		t.Fatal("a lone Hub has a cluster part")
	}
	h.Detach(c)
	if err := h.Call(context.Background(), 1, "status", nil, nil); !errors.Is(err, ErrOffline) {
		t.Fatalf("Call = %v", err)
	}
}

// TestAnswerThroughOtherNode: the agent's answer reaches another node
// than its channel's (a load balancer without sticky routing); it is
// relayed to the holder, where the call waits, whichever node asked.
// Another machine's answer finds no call there either.
func TestAnswerThroughOtherNode(t *testing.T) {
	n := newTwoHubs(t)
	c := attach(t, n.a, 4)
	defer n.a.Detach(c)
	go func() {
		for {
			select {
			case <-c.Gone():
				return
			case cmd := <-c.Commands():
				if n.b.Deliver(context.Background(), 5, cmd.ID, Reply{Result: json.RawMessage(`{"synced":false}`)}) {
					t.Error("machine 5's answer was taken by machine 4's call")
				}
				if !n.b.Deliver(context.Background(), 4, cmd.ID, Reply{Result: json.RawMessage(`{"synced":true}`)}) {
					t.Error("the answer relayed through B found no call")
				}
			}
		}
	}()
	for _, asker := range []struct {
		name string
		hub  *Hub
	}{{"A, the holder", n.a}, {"B", n.b}} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var st struct{ Synced bool }
		if err := asker.hub.Call(ctx, 4, "status", nil, &st); err != nil || !st.Synced {
			t.Fatalf("Call through %s = %v, %+v", asker.name, err, st)
		}
		cancel()
	}
	if n.b.Deliver(context.Background(), 4, "stale.4", Reply{}) {
		t.Fatal("an answer to no call was taken")
	}
}
