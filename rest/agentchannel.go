package rest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"berth/account"
	"berth/agentlink"
)

// The agent's channel (docs/agent.md): `berth agent` holds GET
// /api/2/agent/channel open and reads commands from it, one JSON object
// per line, and answers each at POST /api/2/agent/reply/{call_id}. Both
// go over the agent's one HTTP/2 connection. They are berth's, not the
// spec's, and take only a token issued to a machine.

// channelPing is how often the channel carries a ping when idle, so the
// agent (heartbeatTimeout) and every proxy between see it alive.
const channelPing = 20 * time.Second

// maxReply bounds an agent's answer: the largest is an ls of a big
// folder's names.
const maxReply = 16 << 20

func (s *server) agentRoutes() {
	s.handleStream("GET /api/2/agent/channel", s.authedStream(s.agentChannel))
	s.handle("POST /api/2/agent/reply/{call_id}", s.authed(s.agentReply))
	// Another node's call for a machine whose agent is connected here
	// (agentrelay.go): the cluster secret, never a token.
	s.handlePublic("POST "+agentlink.RelayPath+"{machine_id}", s.agentRelay)
}

// agentMachine returns the machine the request's token was issued to, or
// 403 for a token issued without one (a browser's, an administrator's
// tool's).
func agentMachine(r *http.Request) (uint64, error) {
	id := callerOf(r).MachineID
	if id == 0 {
		return 0, Describe(ErrForbidden, "the agent's channel takes a token issued to a machine (the password grant with guid)")
	}
	return id, nil
}

// agentChannel serves the channel: a hello naming the machine, then the
// hub's commands for it and a ping whenever it has been quiet, until the
// agent goes or a newer connection of the same machine replaces this one.
func (s *server) agentChannel(w http.ResponseWriter, r *http.Request) error {
	id, err := agentMachine(r)
	if err != nil {
		return err
	}
	version := r.URL.Query().Get("agent_version")
	if len(version) > 64 {
		return Describe(ErrInvalidRequest, "agent_version is longer than 64 bytes")
	}
	// The session, not the token: the token expires within the hour
	// while the agent refreshes its own and keeps the channel.
	token, _ := bearer(r)
	_, ses, err := s.accounts.SessionOf(r.Context(), token)
	if err != nil {
		return err
	}
	conn, err := s.agents.Attach(r.Context(), id)
	if err != nil {
		return err
	}
	if err := s.accounts.MachineSeen(r.Context(), id, true, version, time.Now()); err != nil {
		s.agents.Detach(conn)
		return err
	}
	defer func() {
		s.agents.Detach(conn)
		// The request's context has ended; the record is still due.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
		defer cancel()
		if err := s.accounts.MachineSeen(ctx, id, false, "", time.Now()); err != nil {
			s.log.Warn("recording a machine's disconnect", "machine", id, "error", err)
		}
	}()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no") // nginx: do not hold the lines back
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	send := func(c agentlink.Command) error {
		if err := enc.Encode(c); err != nil {
			return err
		}
		return rc.Flush()
	}
	hello, _ := json.Marshal(struct {
		MachineID uint64 `json:"machine_id"`
		Ping      int    `json:"ping_seconds"`
	}{id, int(channelPing / time.Second)})
	if err := send(agentlink.Command{Op: "hello", Args: hello}); err != nil {
		return err
	}
	t := time.NewTicker(channelPing)
	defer t.Stop()
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-conn.Gone():
			return nil
		case c := <-conn.Commands():
			if !s.channelHolds(r, id, ses) {
				// The command is dropped with the channel: its call
				// fails as for an agent not connected (Detach).
				return nil
			}
			if err := send(c); err != nil {
				return err
			}
			t.Reset(channelPing)
		case <-t.C:
			if !s.channelHolds(r, id, ses) {
				return nil
			}
			if err := send(agentlink.Command{Op: "ping"}); err != nil {
				return err
			}
		}
	}
}

// channelHolds reports whether the session the channel of machine id
// was opened in still holds. The channel is one request, authenticated
// when it began and held open for hours; what ends the session (signed
// out, a new password, its person or organization disabled, its machine
// deleted) must end the channel before the next call reaches an agent
// that may no longer be its person's. The access token it was opened
// with expiring is no such end: the agent refreshes its own.
func (s *server) channelHolds(r *http.Request, id uint64, ses account.Session) bool {
	c, err := s.accounts.SessionCaller(r.Context(), ses)
	if err == nil {
		err = s.accounts.TwoStepDue(r.Context(), &c)
	}
	if err != nil {
		s.log.Info("agent channel ended: its session no longer holds", "machine", id, "error", err)
		return false
	}
	return true
}

// agentReply takes the agent's answer to one call: JSON {result} or
// {error: {error, error_description}}. A call that is not waiting, or is
// another machine's, is 404. In a cluster the answer may reach another
// node than the channel's; it is relayed there (agentlink.Hub.Deliver).
func (s *server) agentReply(r *http.Request) (any, error) {
	id, err := agentMachine(r)
	if err != nil {
		return nil, err
	}
	// The body is read only for a call that waits for it, and for one
	// answer at a time: an answer to nothing, or a second one, could
	// otherwise have the server hold maxReply bytes per request.
	release, ok := s.agents.Claim(id, r.PathValue("call_id"))
	if !ok {
		return nil, Describe(ErrNotFound, "no call %q waits for an answer from this machine", r.PathValue("call_id"))
	}
	defer release()
	var rep agentlink.Reply
	dec := json.NewDecoder(io.LimitReader(r.Body, maxReply))
	if err := dec.Decode(&rep); err != nil {
		return nil, Describe(ErrInvalidRequest, "the answer is not a JSON object {result} or {error} of at most %d bytes", maxReply)
	}
	if !s.agents.Deliver(r.Context(), id, r.PathValue("call_id"), rep) {
		return nil, Describe(ErrNotFound, "no call %q waits for an answer from this machine", r.PathValue("call_id"))
	}
	return nil, nil
}

// callAgent sends op to machine id's agent and waits for its answer
// (agentlink.Hub.Call). An error the agent answered with comes back as
// the API's error of the same code, with the agent's description;
// agentlink's own errors go through the error table.
func (s *server) callAgent(ctx context.Context, machineID uint64, op string, args, result any) error {
	err := s.agents.Call(ctx, machineID, op, args, result)
	var ae *agentlink.AgentError
	if !errors.As(err, &ae) {
		return err
	}
	base := ErrUnavailable
	switch ae.Code {
	case "invalid_request":
		base = ErrInvalidRequest
	case "not_found":
		base = ErrNotFound
	case "forbidden":
		base = ErrForbidden
	}
	return Describe(base, "the machine answered: %s", agentText(ae.Description))
}

// maxAgentText bounds the part of an agent's error description the API
// answers with and the log records.
const maxAgentText = 256

// agentText is an agent's error description as the API shows it: at
// most maxAgentText bytes of valid UTF-8, control characters dropped. The
// description is the machine's word, answered to administrators and, as a
// 503, logged: a compromised agent sent megabytes of terminal escapes
// into both.
func agentText(s string) string {
	long := len(s) > 4*maxAgentText
	if long {
		s = s[:4*maxAgentText] // a rune cut here is mended below
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return -1
		}
		return r
	}, s)
	if long || len(s) > maxAgentText {
		cut := min(len(s), maxAgentText)
		for cut < len(s) && cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}
