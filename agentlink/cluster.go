package agentlink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/fxamacker/cbor/v2"

	"berth/kv"
)

// Cluster is what the Hub of one node among several needs to tell the
// others which agents it holds and to reach the agents they hold.
type Cluster struct {
	// Store is the metadata store every node shares.
	Store kv.Store
	// Node names this process, unique among every node's processes (a
	// restarted node is another holder: its predecessor's records are
	// stale).
	Node string
	// URL is the base URL other nodes reach this node's relay route at
	// (cluster.advertise_url, "https://10.0.0.1:8443"). Required: a
	// node without one is a lone node's Hub (New), as daemon makes it.
	URL string
	// Forward sends a call to the node that holds the machine. Nil:
	// machines held elsewhere are offline from here.
	Forward Forwarder
	// TTL is how long a holder's record lives without being renewed
	// (every third of it); 0 is DefaultRecordTTL.
	TTL time.Duration
	// Logger takes the failures of records and relays; nil discards.
	Logger *slog.Logger
}

// DefaultRecordTTL bounds how long a node that died without detaching
// (SIGKILL, a power cut) stays recorded as holding its machines. Calls
// relayed to a dead node fail at once (the connection is refused), so
// the TTL matters only for a node that is cut off but alive; a longer one
// costs fewer renewals (one transaction per node, per 256 agents, per
// third of it).
const DefaultRecordTTL = 90 * time.Second

// renewBatch is how many records one renewal transaction touches.
const renewBatch = 256

// noticeTimeout bounds a relayed notice, which nobody waits for.
const noticeTimeout = 10 * time.Second

// relayMargin is how much earlier than its caller a relayed call ends on
// the holder, so the holder's timeout comes back as ErrTimeout rather
// than the caller's context ending first.
const relayMargin = 500 * time.Millisecond

// connSeq is the store's sequence of connection generations.
const connSeq = "agentconn"

// NewCluster returns a Hub of one node of a cluster (New's, plus the
// records and relays of cluster.go). Run keeps its records alive.
func NewCluster(c Cluster) *Hub {
	if c.TTL <= 0 {
		c.TTL = DefaultRecordTTL
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	h := New()
	h.cluster = &cluster{Cluster: c, hub: h}
	return h
}

// cluster is a Hub's part in a cluster.
type cluster struct {
	Cluster
	hub *Hub
}

// holder is the record of which node holds a machine's channel, under
// kv.AgentHolder and the machine's id, written with a TTL.
type holder struct {
	Node string `cbor:"1,keyasint"`
	URL  string `cbor:"2,keyasint"`
	// Gen orders the machine's connections, whichever node took them
	// (a store sequence, kv.NextOrderedID): a record with a higher one is a newer
	// connection's, which an older one never overwrites or removes.
	Gen uint64 `cbor:"3,keyasint"`
}

func holderKey(machineID uint64) []byte { return kv.Key(kv.AgentHolder, machineID) }

// readHolder returns machine id's record; ok is false when there is none.
func readHolder(tx kv.Txn, machineID uint64) (h holder, ok bool, err error) {
	v, err := tx.Get(holderKey(machineID))
	if errors.Is(err, kv.ErrNotFound) {
		return h, false, nil
	}
	if err != nil {
		return h, false, err
	}
	if err := cbor.Unmarshal(v, &h); err != nil {
		return h, false, fmt.Errorf("agentlink: machine %d's holder record: %w", machineID, err)
	}
	return h, true, nil
}

// write records this node as the holder of c's machine.
func (cl *cluster) write(tx kv.Txn, c *Conn) error {
	v, err := cbor.Marshal(holder{Node: cl.Node, URL: cl.URL, Gen: c.gen})
	if err != nil {
		return err
	}
	return tx.SetTTL(holderKey(c.machine), v, cl.TTL)
}

// attach gives c its generation and records this node as its machine's
// holder, unless a newer connection of the machine (taken on another
// node between the two steps) recorded itself already: then c is stale
// and refused with ErrOffline.
func (cl *cluster) attach(ctx context.Context, c *Conn) error {
	// Ordered across nodes, not NextID: each node's leases of ids
	// interleave (kv/postgres), and a reconnection to a node whose lease
	// is below another's was older than the connection it replaced, and
	// refused while that one's record lived.
	gen, err := kv.NextOrderedID(ctx, cl.Store, connSeq)
	if err != nil {
		return err
	}
	c.gen = gen
	return cl.Store.Update(ctx, func(tx kv.Txn) error {
		rec, ok, err := readHolder(tx, c.machine)
		if err != nil {
			return err
		}
		if ok && rec.Gen > c.gen {
			return ErrOffline
		}
		return cl.write(tx, c)
	})
}

// detach removes c's record, unless a newer connection has replaced it.
func (cl *cluster) detach(c *Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := cl.Store.Update(ctx, func(tx kv.Txn) error {
		rec, ok, err := readHolder(tx, c.machine)
		if err != nil || !ok || rec.Gen != c.gen {
			return err
		}
		return tx.Delete(holderKey(c.machine))
	})
	if err != nil {
		// It expires by itself; until then calls relayed here are
		// answered offline (the holder checks its own connections).
		cl.Logger.Warn("removing a machine's holder record", "machine", c.machine, "error", err)
	}
}

// Run renews the records of the agents connected to this node until ctx
// ends, and closes a connection whose record a newer connection of its
// machine (on any node) took over. On a lone node it only waits for ctx.
func (h *Hub) Run(ctx context.Context) {
	cl := h.cluster
	if cl == nil {
		<-ctx.Done()
		return
	}
	t := time.NewTicker(cl.TTL / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cl.renew(ctx)
	}
}

// renew renews every record of this node's connections, in batches.
func (cl *cluster) renew(ctx context.Context) {
	h := cl.hub
	h.mu.Lock()
	conns := make([]*Conn, 0, len(h.conns))
	for _, c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	for len(conns) > 0 {
		batch := conns[:min(renewBatch, len(conns))]
		conns = conns[len(batch):]
		var stale []*Conn
		err := cl.Store.Update(ctx, func(tx kv.Txn) error {
			stale = stale[:0]
			for _, c := range batch {
				rec, ok, err := readHolder(tx, c.machine)
				if err != nil {
					return err
				}
				if ok && rec.Gen > c.gen {
					stale = append(stale, c)
					continue
				}
				if err := cl.write(tx, c); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			if ctx.Err() == nil {
				cl.Logger.Warn("renewing the records of the agents connected here", "agents", len(batch), "error", err)
			}
			continue
		}
		for _, c := range stale {
			cl.Logger.Info("an agent's newer connection on another node replaces the one here", "machine", c.machine)
			h.unlink(c)
		}
	}
}

// relay sends req to the node that holds machine id's channel. No
// record, a record of this very node (which would hold the machine in
// its own table if it still did), or a holder that cannot be reached is
// ErrOffline, answered at once.
func (cl *cluster) relay(ctx context.Context, machineID uint64, req RelayRequest) (Reply, error) {
	var rec holder
	var ok bool
	err := cl.Store.View(ctx, func(tx kv.Txn) error {
		var err error
		rec, ok, err = readHolder(tx, machineID)
		return err
	})
	if err != nil {
		return Reply{}, err
	}
	// Every node writes its URL, but the record is read back from a
	// store other processes write: one without a URL has nowhere to go.
	if !ok || rec.Node == cl.Node || rec.URL == "" {
		return Reply{}, ErrOffline
	}
	if cl.Forward == nil {
		cl.Logger.Warn("a machine's agent is connected to another node, and this one cannot relay to it: it has no cluster secret (cluster.secret_file)", "machine", machineID, "holder", rec.URL)
		return Reply{}, ErrOffline
	}
	if d, ok := ctx.Deadline(); ok {
		req.TimeoutMS = max(1, (time.Until(d) - relayMargin).Milliseconds())
	}
	ans, err := cl.Forward.Forward(ctx, rec.URL, machineID, req)
	if err != nil {
		if ctx.Err() != nil {
			return Reply{}, callDone(ctx)
		}
		cl.Logger.Warn("relaying a call to the node that holds the machine's agent", "machine", machineID, "holder", rec.URL, "op", req.Op, "error", err)
		return Reply{}, fmt.Errorf("%w (its node %s did not answer: %v)", ErrOffline, rec.URL, err)
	}
	switch ans.Failure {
	case "":
		return Reply{Result: ans.Result, Error: ans.Error}, nil
	case failureOffline:
		return Reply{}, ErrOffline
	case failureTimeout:
		return Reply{}, ErrTimeout
	case failureNoCall:
		return Reply{}, errNoCall
	default:
		return Reply{}, fmt.Errorf("agentlink: the holder %s answered the failure %q", rec.URL, ans.Failure)
	}
}

// errNoCall is a relayed answer the holder had no waiting call for.
var errNoCall = errors.New("agentlink: no call waits for this answer")

// Deliver hands the agent's answer to call id to the Call waiting for it,
// on this node (Reply) or, in a cluster, on the node that holds the
// machine's channel, where every call to the machine waits: an answer
// the load balancer sent to another node than the channel's. It reports
// false when no call of machine id waits under that id.
func (h *Hub) Deliver(ctx context.Context, machineID uint64, id string, r Reply) bool {
	if h.Reply(machineID, id, r) {
		return true
	}
	if h.cluster == nil || h.Online(machineID) {
		return false
	}
	_, err := h.cluster.relay(ctx, machineID, RelayRequest{CallID: id, Reply: &r})
	return err == nil
}

// relayNotice relays a notice in the background: nobody waits for it,
// and a machine that misses it learns what changed when it connects.
func (cl *cluster) relayNotice(machineID uint64, req RelayRequest) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), noticeTimeout)
		defer cancel()
		if _, err := cl.relay(ctx, machineID, req); err != nil && !errors.Is(err, ErrOffline) {
			cl.Logger.Warn("relaying a notice to a machine's agent", "machine", machineID, "op", req.Op, "error", err)
		}
	}()
}

// Serve performs a call another node relayed here (the holder's side of
// relay): to the machine's agent if it is connected to this node, which
// it checks now, whatever the record said when the caller read it. It
// never relays further, so a stale record cannot make calls go round.
func (h *Hub) Serve(ctx context.Context, machineID uint64, req RelayRequest) RelayAnswer {
	timeout := DefaultCallTimeout
	if req.TimeoutMS > 0 {
		timeout = min(timeout, time.Duration(req.TimeoutMS)*time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if req.CallID != "" {
		if req.Reply == nil || !h.Reply(machineID, req.CallID, *req.Reply) {
			return RelayAnswer{Failure: failureNoCall}
		}
		return RelayAnswer{}
	}
	if req.Notice {
		if !h.notifyLocal(machineID, req.Op, req.Args) {
			return RelayAnswer{Failure: failureOffline}
		}
		return RelayAnswer{}
	}
	r, err := h.callLocal(ctx, machineID, req.Op, req.Args)
	switch {
	case err == nil:
		return RelayAnswer{Result: r.Result, Error: r.Error}
	case errors.Is(err, ErrOffline):
		return RelayAnswer{Failure: failureOffline}
	default:
		// ErrTimeout, or the caller gave up and the request ended.
		return RelayAnswer{Failure: failureTimeout}
	}
}
