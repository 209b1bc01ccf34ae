package agentlink

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// RelayPath is the route, below a node's advertised URL, that takes calls
// relayed from other nodes (POST RelayPath + machine id; rest serves it).
const RelayPath = "/api/2/agent/relay/"

// SecretHeader carries the cluster secret on a relayed call: the route
// takes no user's token, only this.
const SecretHeader = "Berth-Cluster-Secret"

// maxAnswer bounds a relayed answer: an agent's reply (at most 16 MiB,
// rest's maxReply) in its envelope.
const maxAnswer = 17 << 20

// Failures a holder answers instead of a Reply.
const (
	failureOffline = "offline" // ErrOffline
	failureTimeout = "timeout" // ErrTimeout
	failureNoCall  = "no_call" // an answer no call waits for (Hub.Reply's false)
)

// RelayRequest is a call (or notice) relayed to the node that holds the
// machine's channel, as JSON; or, with CallID, the agent's answer to a
// call that waits there, which reached another node.
type RelayRequest struct {
	Op     string          `json:"op,omitempty"`
	Args   json.RawMessage `json:"args,omitempty"`
	Notice bool            `json:"notice,omitempty"`
	// TimeoutMS is how long the holder may wait for the agent, a little
	// less than the caller's own deadline leaves (0: the default).
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// CallID and Reply are an agent's answer to call CallID.
	CallID string `json:"call_id,omitempty"`
	Reply  *Reply `json:"reply,omitempty"`
}

// Valid reports whether r is a call (an op) or an answer (a call id and
// its reply).
func (r RelayRequest) Valid() bool {
	if r.CallID != "" {
		return r.Reply != nil && r.Op == ""
	}
	return r.Op != ""
}

// RelayAnswer is the holder's outcome of a RelayRequest: the agent's
// Reply, or a Failure of the holder's Hub ("offline", "timeout").
type RelayAnswer struct {
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *AgentError     `json:"error,omitempty"`
	Failure string          `json:"failure,omitempty"`
}

// Forwarder sends a RelayRequest to the node at baseURL. An error is the
// transport's (the node is down, refused the secret, answered garbage);
// the holder's own outcome is in the RelayAnswer.
type Forwarder interface {
	Forward(ctx context.Context, baseURL string, machineID uint64, req RelayRequest) (RelayAnswer, error)
}

// ForwarderFunc is a function that is a Forwarder (tests wire two Hubs
// directly).
type ForwarderFunc func(ctx context.Context, baseURL string, machineID uint64, req RelayRequest) (RelayAnswer, error)

// Forward calls f.
func (f ForwarderFunc) Forward(ctx context.Context, baseURL string, machineID uint64, req RelayRequest) (RelayAnswer, error) {
	return f(ctx, baseURL, machineID, req)
}

// HTTPForwarder relays over HTTPS to the holder's RelayPath with the
// cluster secret. Client's TLS configuration decides which peers are
// trusted (daemon: cluster.ca_file); the secret is sent only to a peer
// that passed it.
type HTTPForwarder struct {
	Client *http.Client
	Secret string
}

// Forward posts req to baseURL's relay route.
func (f HTTPForwarder) Forward(ctx context.Context, baseURL string, machineID uint64, req RelayRequest) (RelayAnswer, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return RelayAnswer{}, err
	}
	u := strings.TrimRight(baseURL, "/") + RelayPath + strconv.FormatUint(machineID, 10)
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return RelayAnswer{}, err
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set(SecretHeader, f.Secret)
	resp, err := f.Client.Do(hr)
	if err != nil {
		return RelayAnswer{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return RelayAnswer{}, fmt.Errorf("agentlink: %s answered %d: %s", u, resp.StatusCode, bytes.TrimSpace(msg))
	}
	var ans RelayAnswer
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(&ans); err != nil {
		return RelayAnswer{}, fmt.Errorf("agentlink: %s's answer: %w", u, err)
	}
	return ans, nil
}
