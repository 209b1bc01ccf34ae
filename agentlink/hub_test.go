package agentlink

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// agentLoop answers every call on c with answer(op), until c is gone.
func agentLoop(h *Hub, machine uint64, c *Conn, answer func(Command) Reply) {
	for {
		select {
		case <-c.Gone():
			return
		case cmd := <-c.Commands():
			if cmd.ID != "" {
				h.Reply(machine, cmd.ID, answer(cmd))
			}
		}
	}
}

// attach attaches machine id's agent to h, failing the test on an error.
func attach(t *testing.T, h *Hub, id uint64) *Conn {
	t.Helper()
	c, err := h.Attach(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCall(t *testing.T) {
	type result struct {
		Names []string `json:"names"`
	}
	cases := []struct {
		name    string
		connect bool
		answer  func(Command) Reply // nil: never answers
		ctxWait time.Duration
		wantErr error
		want    []string
	}{
		{name: "answered", connect: true, answer: func(c Command) Reply {
			return Reply{Result: json.RawMessage(`{"names":["a","b"]}`)}
		}, want: []string{"a", "b"}},
		{name: "the agent's error", connect: true, answer: func(Command) Reply {
			return Reply{Error: &AgentError{Code: "forbidden", Description: "outside the mapped folders"}}
		}, wantErr: &AgentError{}},
		{name: "offline", connect: false, wantErr: ErrOffline},
		{name: "silent", connect: true, ctxWait: 50 * time.Millisecond, wantErr: ErrTimeout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := New()
			if tc.connect {
				c := attach(t, h, 7)
				defer h.Detach(c)
				if tc.answer != nil {
					go agentLoop(h, 7, c, tc.answer)
				}
			}
			ctx := context.Background()
			if tc.ctxWait > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.ctxWait)
				defer cancel()
			}
			var got result
			err := h.Call(ctx, 7, "ls", map[string]string{"path": "/x"}, &got)
			switch want := tc.wantErr.(type) {
			case nil:
				if err != nil || len(got.Names) != len(tc.want) {
					t.Fatalf("Call = %v, %+v; want %v", err, got, tc.want)
				}
			case *AgentError:
				var ae *AgentError
				if !errors.As(err, &ae) || ae.Code != "forbidden" {
					t.Fatalf("Call = %v; want the agent's error", err)
				}
			default:
				if !errors.Is(err, want) {
					t.Fatalf("Call = %v; want %v", err, want)
				}
			}
		})
	}
}

// TestGoneMidCall: a call waiting on an agent that goes ends with
// ErrOffline at once, not at its timeout.
func TestGoneMidCall(t *testing.T) {
	h := New()
	c := attach(t, h, 1)
	go func() {
		<-c.Commands()
		h.Detach(c)
	}()
	start := time.Now()
	err := h.Call(context.Background(), 1, "status", nil, nil)
	if !errors.Is(err, ErrOffline) || time.Since(start) > 5*time.Second {
		t.Fatalf("Call = %v after %v; want ErrOffline at once", err, time.Since(start))
	}
	if h.Online(1) {
		t.Fatal("the machine is online after its agent went")
	}
}

// TestReplyOnlyByItsMachine: one machine cannot answer another's call,
// and a stale answer finds nothing.
func TestReplyOnlyByItsMachine(t *testing.T) {
	h := New()
	c := attach(t, h, 1)
	defer h.Detach(c)
	ids := make(chan string, 1)
	go func() { ids <- (<-c.Commands()).ID }()
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		errc <- h.Call(ctx, 1, "ls", nil, nil)
	}()
	id := <-ids
	if h.Reply(2, id, Reply{}) {
		t.Fatal("machine 2 answered machine 1's call")
	}
	// An answer's body is read only once Claim reserved the call: for
	// the call's own machine, one answer at a time, never for a call
	// that does not wait.
	for _, tc := range []struct {
		machine uint64
		id      string
	}{{2, id}, {1, "no-such-call"}} {
		if _, ok := h.Claim(tc.machine, tc.id); ok {
			t.Fatalf("machine %d claimed call %q", tc.machine, tc.id)
		}
	}
	release, ok := h.Claim(1, id)
	if !ok {
		t.Fatal("machine 1 could not claim its own call")
	}
	if _, ok := h.Claim(1, id); ok {
		t.Fatal("a second answer claimed a call being answered")
	}
	release()
	release, ok = h.Claim(1, id)
	if !ok {
		t.Fatal("an answer that could not be read kept its call claimed")
	}
	release()
	if !h.Reply(1, id, Reply{Result: json.RawMessage(`{}`)}) {
		t.Fatal("machine 1 could not answer its own call")
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if h.Reply(1, id, Reply{}) {
		t.Fatal("a second answer to the same call was taken")
	}
}

// TestNewConnectionReplacesOld: an agent that reconnects before the old
// request ended owns the machine; the old Conn is gone and its detach
// does not take the machine offline.
func TestNewConnectionReplacesOld(t *testing.T) {
	h := New()
	old := attach(t, h, 3)
	cur := attach(t, h, 3)
	select {
	case <-old.Gone():
	default:
		t.Fatal("the old connection is not gone")
	}
	h.Detach(old)
	if !h.Online(3) {
		t.Fatal("detaching the replaced connection took the machine offline")
	}
	if err := h.Notify(3, "reconfigure", nil); err != nil {
		t.Fatal(err)
	}
	if cmd := <-cur.Commands(); cmd.Op != "reconfigure" || cmd.ID != "" {
		t.Fatalf("notice = %+v", cmd)
	}
	h.Detach(cur)
	if h.Online(3) {
		t.Fatal("online after the current connection went")
	}
	if err := h.Notify(3, "reconfigure", nil); err != nil {
		t.Fatal("a notice to an offline machine failed: ", err)
	}
}

// TestClose: a stopping server ends every channel (Gone), a call waiting
// on one fails as offline, and a channel attached after it is gone at
// once, so the server's shutdown waits for none of them.
func TestClose(t *testing.T) {
	h := New()
	a, b := attach(t, h, 1), attach(t, h, 2)
	called := make(chan error, 1)
	go func() { called <- h.Call(context.Background(), 1, "ls", nil, nil) }()
	<-a.Commands()
	h.Close()
	for _, c := range []*Conn{a, b, attach(t, h, 3)} {
		select {
		case <-c.Gone():
		case <-time.After(5 * time.Second):
			t.Fatalf("machine %d's channel is not gone after Close", c.machine)
		}
		h.Detach(c)
	}
	if err := <-called; !errors.Is(err, ErrOffline) {
		t.Errorf("a call waiting at Close: %v, want ErrOffline", err)
	}
	if h.Online(1) || h.Online(3) {
		t.Error("a machine is online after Close")
	}
}

// TestCloseDuringAttach: a Close that comes while an Attach is under way
// (in a cluster, recording the holder takes a store transaction) ends
// that channel too; it was entered in conns after Close had listed them,
// and its request held the server's shutdown for the whole grace.
func TestCloseDuringAttach(t *testing.T) {
	h := New()
	h.attaching = h.Close
	c := attach(t, h, 1)
	select {
	case <-c.Gone():
	case <-time.After(5 * time.Second):
		t.Fatal("a channel attached while Close ran is not gone")
	}
	h.Detach(c)
	if h.Online(1) {
		t.Error("the machine is online after Close")
	}
}
