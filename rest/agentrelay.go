package rest

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"io"
	"net/http"

	"berth/agentlink"
)

// maxRelayRequest bounds a relayed call's body: an op and its arguments
// (a path to list, a restore's target), or an agent's answer (maxReply)
// in its envelope.
const maxRelayRequest = maxReply + 1<<20

// agentRelay answers POST /api/2/agent/relay/{machine_id}: a call that
// another node of the cluster relays to the machine's agent, connected
// to this node (agentlink.Hub.Serve, which checks that it still is), or
// the agent's answer to a call waiting here that reached another node. It
// takes the cluster secret in agentlink.SecretHeader and no token: no
// person's token, whatever its rights, reaches it. The answer is the
// call's outcome (agentlink.RelayAnswer), an agent's error or an offline
// machine included; only a refused or malformed relay goes through the
// error table.
func (s *server) agentRelay(r *http.Request) (any, error) {
	if s.opts.ClusterSecret == "" {
		s.warnRelayRefused("refused a relayed agent call: this node has no cluster secret (cluster.secret_file)", r)
		return nil, Describe(ErrForbidden, "this node takes no relayed calls: it has no cluster secret")
	}
	if !sameSecret(r.Header.Get(agentlink.SecretHeader), s.opts.ClusterSecret) {
		s.warnRelayRefused("refused a relayed agent call: the cluster secret is missing or wrong", r)
		return nil, Describe(ErrForbidden, "the cluster secret is missing or wrong")
	}
	id, ok := parseID(r.PathValue("machine_id"))
	if !ok {
		return nil, ErrNotFound
	}
	var req agentlink.RelayRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, maxRelayRequest)).Decode(&req); err != nil || !req.Valid() {
		return nil, Describe(ErrInvalidRequest, "the body is not a JSON relay request ({op, args}, or {call_id, reply}) of at most %d bytes", maxRelayRequest)
	}
	return s.agents.Serve(r.Context(), id, req), nil
}

// sameSecret compares in constant time, of the length too: both sides
// are hashed first, so the comparison takes as long whatever was sent.
func sameSecret(got, want string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

// warnRelayRefused logs a refused relayed call, the first of each
// minute: the later ones of the minute go unlogged.
func (s *server) warnRelayRefused(msg string, r *http.Request) {
	if ok, _, _ := s.relayRefused.Use("relay", 1); ok {
		s.log.Warn(msg, "client", r.RemoteAddr)
	}
}
