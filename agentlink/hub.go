// Package agentlink is the server's end of the channel to `berth agent`:
// which machines are connected now, and a call that sends one of them a
// command and waits for its answer.
//
// The agent holds one outbound HTTPS request open (GET
// /api/2/agent/channel, docs/agent.md); the front end that serves it
// attaches a Conn here and writes the Conn's commands down the response
// as they come. Answers come back as separate requests on the same
// HTTP/2 connection (POST /api/2/agent/reply/<call>), which the front
// end hands to Reply. Nothing here knows HTTP, so a test drives a Hub
// directly and a later transport can replace the one rest serves.
//
// A machine is connected to one node at a time. On several nodes that
// share a metadata store (cluster.go), the node that holds a machine's
// channel records itself in the store, and a call for a machine held
// elsewhere is relayed to that node (relay.go, the one place here that
// speaks HTTP: as a client of the holder's relay route).
package agentlink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Errors of a Call. Front ends map them in their error tables.
var (
	// ErrOffline is a command for a machine whose agent is not
	// connected (or went away before answering).
	ErrOffline = errors.New("agentlink: the machine's agent is not connected")
	// ErrTimeout is a command the agent did not answer in time.
	ErrTimeout = errors.New("agentlink: the machine's agent did not answer in time")
	// ErrBadAnswer is an answer that does not have the shape the
	// command's result takes: the agent's fault, or a hostile one's, not
	// the server's.
	ErrBadAnswer = errors.New("agentlink: the machine's agent answered in a form the command does not take")
)

// AgentError is an error the agent answered with, in the API's form.
type AgentError struct {
	Code        string `json:"error"`
	Description string `json:"error_description,omitempty"`
}

func (e *AgentError) Error() string {
	if e.Description == "" {
		return "agent: " + e.Code
	}
	return "agent: " + e.Code + ": " + e.Description
}

// Command is one message to an agent, written as one JSON line. ID is
// empty for a notice that takes no answer.
type Command struct {
	ID   string          `json:"id,omitempty"`
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args,omitempty"`
}

// Reply is an agent's answer to the command with the same ID: Result, or
// Error when it failed.
type Reply struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *AgentError     `json:"error,omitempty"`
}

// DefaultCallTimeout bounds a Call whose context has no earlier deadline:
// an agent that is connected but stuck answers the caller with
// ErrTimeout instead of holding the request open.
const DefaultCallTimeout = 30 * time.Second

// Hub knows the connected agents. The zero value is not usable; use New.
type Hub struct {
	mu      sync.Mutex
	conns   map[uint64]*Conn
	pending map[string]*pending
	seq     atomic.Uint64
	// cluster records where this node's agents are and relays calls for
	// the others' (cluster.go); nil on a lone node.
	cluster *cluster
	// relayed holds a slot for each answer being read for a call that
	// waits on another node (Claim).
	relayed chan struct{}
	// closing is set by Close: the server is stopping.
	closing atomic.Bool
	// attaching, when set (by tests), runs in Attach between its first
	// look at closing and its entry in conns: the window a Close can
	// fall in while the store records the holder (cluster.attach).
	attaching func()
}

type pending struct {
	machine uint64
	conn    *Conn
	done    chan Reply
	// claimed: an answer to the call is being read (Claim), so a
	// second one is refused before its body is.
	claimed bool
}

// maxRelayedAnswers bounds the answers read at once on this node for
// calls that may wait on another node (Claim): one arrives here only when
// a balancer sends an agent's answer elsewhere than its channel.
const maxRelayedAnswers = 4

// New returns an empty Hub.
func New() *Hub {
	return &Hub{conns: make(map[uint64]*Conn), pending: make(map[string]*pending), relayed: make(chan struct{}, maxRelayedAnswers)}
}

// Conn is one connected agent. Its commands are read by the goroutine
// that serves the channel request.
type Conn struct {
	machine uint64
	out     chan Command
	gone    chan struct{}
	once    sync.Once
	// gen is the connection's generation in the cluster (0 on a lone
	// node): a record of a higher one is a newer connection's.
	gen uint64
}

// Attach records machine id's agent as connected and returns its Conn.
// A Conn already attached for the machine (an agent that reconnected
// before the server noticed the old request end) is closed: the newest
// connection is the agent's. In a cluster it also records this node as
// the machine's holder; an error is the store's, and nothing is
// attached then.
func (h *Hub) Attach(ctx context.Context, machineID uint64) (*Conn, error) {
	c := &Conn{machine: machineID, out: make(chan Command, 16), gone: make(chan struct{})}
	if h.closing.Load() {
		// Stopping: the channel ends at once, and the agent
		// connects again, to this node once it is back or another.
		c.once.Do(func() { close(c.gone) })
		return c, nil
	}
	if h.cluster != nil {
		if err := h.cluster.attach(ctx, c); err != nil {
			return nil, err
		}
	}
	if h.attaching != nil {
		h.attaching()
	}
	h.mu.Lock()
	if h.closing.Load() {
		// Close came while the store recorded the holder: it listed
		// conns without c, so c ends here. Its request's Detach
		// removes the record.
		h.mu.Unlock()
		c.once.Do(func() { close(c.gone) })
		return c, nil
	}
	old := h.conns[machineID]
	h.conns[machineID] = c
	h.mu.Unlock()
	if old != nil {
		h.drop(old)
	}
	return c, nil
}

// Detach ends c: the calls waiting on it fail with ErrOffline, and the
// machine is offline unless a newer Conn replaced c.
func (h *Hub) Detach(c *Conn) {
	h.unlink(c)
	if h.cluster != nil {
		h.cluster.detach(c)
	}
}

// unlink ends c on this node, leaving the store's record to the caller
// (Detach removes it; a renewal found a newer connection's there).
func (h *Hub) unlink(c *Conn) {
	h.mu.Lock()
	if h.conns[c.machine] == c {
		delete(h.conns, c.machine)
	}
	h.mu.Unlock()
	h.drop(c)
}

func (h *Hub) drop(c *Conn) {
	c.once.Do(func() { close(c.gone) })
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, p := range h.pending {
		if p.conn == c {
			delete(h.pending, id)
			close(p.done)
		}
	}
}

// Close ends every agent's channel on this node (their Gone closes), and
// the channels attached after it at once: the server is stopping. A
// channel is a request that lasts as long as its agent runs, and
// net/http's Shutdown waits for every request, so without it a stop
// with any agent connected waited out the whole grace period. Each
// channel's request still detaches its Conn as it ends (Detach).
func (h *Hub) Close() {
	h.mu.Lock()
	// Set under mu: an Attach enters its Conn under mu after looking
	// at closing there, so each Conn is either listed here or ended by
	// its Attach.
	h.closing.Store(true)
	conns := make([]*Conn, 0, len(h.conns))
	for _, c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	for _, c := range conns {
		h.drop(c)
	}
}

// Commands returns the channel of c's commands, in the order sent.
func (c *Conn) Commands() <-chan Command { return c.out }

// Gone is closed when c was detached or replaced.
func (c *Conn) Gone() <-chan struct{} { return c.gone }

// Online reports whether machine id's agent is connected to this node.
func (h *Hub) Online(machineID uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conns[machineID] != nil
}

// Call sends op with args (marshalled to JSON) to machine id's agent and
// waits for its answer, which it unmarshals into result (nil: ignored).
// An agent connected to another node of the cluster is called through
// that node. Errors: ErrOffline, ErrTimeout, *AgentError, ctx's error.
func (h *Hub) Call(ctx context.Context, machineID uint64, op string, args, result any) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultCallTimeout)
		defer cancel()
	}
	raw, err := marshal(args)
	if err != nil {
		return err
	}
	var r Reply
	if h.cluster != nil && !h.Online(machineID) {
		// Only a machine not connected here at the start: a command
		// its connection here took before it ended may have run, and
		// is not sent again through another node.
		r, err = h.cluster.relay(ctx, machineID, RelayRequest{Op: op, Args: raw})
	} else {
		r, err = h.callLocal(ctx, machineID, op, raw)
	}
	if err != nil {
		return err
	}
	if r.Error != nil {
		return r.Error
	}
	if result == nil || len(r.Result) == 0 {
		return nil
	}
	if err := json.Unmarshal(r.Result, result); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrBadAnswer, op, err)
	}
	return nil
}

// callLocal sends op to machine id's agent when it is connected to this
// node and waits for its answer. Errors: ErrOffline, ErrTimeout, ctx's.
func (h *Hub) callLocal(ctx context.Context, machineID uint64, op string, raw json.RawMessage) (Reply, error) {
	id := strconv.FormatUint(h.seq.Add(1), 36) + "." + strconv.FormatUint(machineID, 36)
	h.mu.Lock()
	c := h.conns[machineID]
	if c == nil {
		h.mu.Unlock()
		return Reply{}, ErrOffline
	}
	p := &pending{machine: machineID, conn: c, done: make(chan Reply, 1)}
	h.pending[id] = p
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.pending, id)
		h.mu.Unlock()
	}()
	select {
	case c.out <- Command{ID: id, Op: op, Args: raw}:
	case <-c.gone:
		return Reply{}, ErrOffline
	case <-ctx.Done():
		return Reply{}, callDone(ctx)
	}
	select {
	case r, ok := <-p.done:
		if !ok {
			return Reply{}, ErrOffline
		}
		return r, nil
	case <-ctx.Done():
		return Reply{}, callDone(ctx)
	}
}

func callDone(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ErrTimeout
	}
	return ctx.Err()
}

// Notify sends op to machine id's agent without waiting for an answer;
// an offline machine is not an error (it learns what changed when it
// connects: docs/agent.md), and neither is a full queue, whose pending
// notices already tell the agent to look again. A notice for an agent
// connected to another node of the cluster is relayed there in the
// background.
func (h *Hub) Notify(machineID uint64, op string, args any) error {
	raw, err := marshal(args)
	if err != nil {
		return err
	}
	if !h.notifyLocal(machineID, op, raw) && h.cluster != nil {
		h.cluster.relayNotice(machineID, RelayRequest{Op: op, Args: raw, Notice: true})
	}
	return nil
}

// notifyLocal queues a notice for machine id's agent when it is
// connected to this node, and reports whether it is.
func (h *Hub) notifyLocal(machineID uint64, op string, raw json.RawMessage) bool {
	h.mu.Lock()
	c := h.conns[machineID]
	h.mu.Unlock()
	if c == nil {
		return false
	}
	select {
	case c.out <- Command{Op: op, Args: raw}:
	case <-c.gone:
	default:
	}
	return true
}

// Claim reserves call id of machine machineID for the one answer whose
// body is about to be read, and returns the function that frees the
// reservation (after Deliver, or a body that could not be read). It
// reports false when no call of that machine waits under that id here, or
// one answer is already being read for it; the front end refuses the
// answer then without reading it, so nobody makes the server hold
// answers no call waits for. A call that may wait on another node (the
// machine's channel is not on this one) is claimed there when
// delivered; here at most maxRelayedAnswers such answers are read at
// once.
func (h *Hub) Claim(machineID uint64, id string) (release func(), ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if p := h.pending[id]; p != nil && p.machine == machineID {
		if p.claimed {
			return nil, false
		}
		p.claimed = true
		return func() {
			h.mu.Lock()
			p.claimed = false
			h.mu.Unlock()
		}, true
	}
	if h.cluster == nil || h.conns[machineID] != nil {
		return nil, false
	}
	select {
	case h.relayed <- struct{}{}:
		return func() { <-h.relayed }, true
	default:
		return nil, false
	}
}

// Reply hands the agent's answer to call id to the Call waiting for it.
// It returns false when no call of machine id waits under that id (it
// timed out, or the id is another machine's), so one agent cannot answer
// another's calls.
func (h *Hub) Reply(machineID uint64, id string, r Reply) bool {
	h.mu.Lock()
	p := h.pending[id]
	if p == nil || p.machine != machineID {
		h.mu.Unlock()
		return false
	}
	delete(h.pending, id)
	h.mu.Unlock()
	p.done <- r
	return true
}

func marshal(args any) (json.RawMessage, error) {
	if args == nil {
		return nil, nil
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("agentlink: %w", err)
	}
	return raw, nil
}
