// Package agent is `berth agent`, the machine side of berth: it signs a
// computer in as a machine, holds one outbound HTTPS connection to the
// server through which the server sends it commands (so it works behind
// NAT), and runs what the machine's owner set up for it: backups of its
// folders into backup roots, restores, and folders mapped to roots.
//
// It is a client of the REST API and never of berth's stores (DESIGN.md);
// it chunks files itself with vfs/chunk to send only what changed. The
// channel, its commands and every choice made where the spec is silent
// are in docs/agent.md.
package agent

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// Version is the agent_version the agent reports.
const Version = "1.0.0"

// Config is how `berth agent` is set up.
type Config struct {
	// Server is the server's base URL, https://host:port.
	Server string
	// Login is the person the machine signs in as.
	Login string
	// Password returns the person's password, never a device password:
	// the agent signs in with the password grant, which takes the
	// account's password and its two-step code, while a device password
	// serves WebDAV alone (it would otherwise be a way around the code).
	// Asked only when the saved session has ended. Nil: the agent runs
	// only while its saved session lasts.
	Password func() (string, error)
	// TwoStepCode returns a two-step code when the person is enrolled.
	// Nil: such a person cannot sign the agent in.
	TwoStepCode func(ctx context.Context) (string, error)
	// StateFile keeps the machine's GUID and session (0600).
	StateFile string
	// CAFile is a PEM file of the certificates to trust for Server (the
	// server's self-signed certificate); empty trusts the system's.
	CAFile string
	// HTTPClient, when set, replaces the client built from CAFile.
	HTTPClient *http.Client
	// Logger receives what the agent does. Nil discards.
	Logger *slog.Logger
	// MinBackoff and MaxBackoff bound the wait between reconnects
	// (defaults 1 s and 60 s).
	MinBackoff, MaxBackoff time.Duration
	// BackupInterval is the time between two runs of a backup
	// (default DefaultBackupInterval).
	BackupInterval time.Duration
	// SetupRefresh is how often the agent reads its set-up again while
	// connected (default DefaultSetupRefresh): what no reconfigure
	// notice reaches it for, such as a policy turned off above the
	// machine's organization, takes effect within it.
	SetupRefresh time.Duration
}

// DefaultSetupRefresh is Config.SetupRefresh's default.
const DefaultSetupRefresh = 5 * time.Minute

// Handler answers one command of the server. args is the command's JSON
// arguments; the result is marshalled to JSON. An *APIError result is
// passed to the server's caller as it is.
type Handler func(ctx context.Context, args json.RawMessage) (any, error)

// Agent is one running `berth agent`.
type Agent struct {
	cfg      Config
	client   *Client
	log      *slog.Logger
	mu       sync.Mutex
	handlers map[string]Handler
	// onConnect run each time the channel (re)connects, after hello;
	// the parts that keep folders in step re-read their set-up there.
	onConnect []func(ctx context.Context)
	setup     setupState
	backups   *backupManager // the backups feature (backup.go)
}

// New returns an Agent for cfg, reading its state file.
func New(cfg Config) (*Agent, error) {
	if cfg.Server == "" || cfg.StateFile == "" {
		return nil, errors.New("agent: the server URL and the state file are required")
	}
	if !strings.HasPrefix(cfg.Server, "https://") {
		return nil, errors.New("agent: the server URL must be https://")
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = time.Second
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = 60 * time.Second
	}
	if cfg.SetupRefresh <= 0 {
		cfg.SetupRefresh = DefaultSetupRefresh
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	st, err := loadState(cfg.StateFile)
	if err != nil {
		return nil, err
	}
	base := strings.TrimRight(cfg.Server, "/")
	if st.Server != base || st.Login != cfg.Login {
		// Another server or person: the saved machine is not this one's.
		st = State{Server: base, Login: cfg.Login}
	}
	hc := cfg.HTTPClient
	if hc == nil {
		if hc, err = httpClient(cfg.CAFile); err != nil {
			return nil, err
		}
	}
	a := &Agent{cfg: cfg, log: log, handlers: make(map[string]Handler)}
	a.client = &Client{base: base, http: hc, cfg: &a.cfg, st: st}
	a.Handle("ping", func(context.Context, json.RawMessage) (any, error) { return struct{}{}, nil })
	a.Handle("status", a.statusResult)
	a.Handle("reconfigure", func(ctx context.Context, _ json.RawMessage) (any, error) { return nil, a.readSetup(ctx) })
	a.OnConnect(func(ctx context.Context) {
		t := time.NewTicker(a.cfg.SetupRefresh)
		defer t.Stop()
		for {
			if err := a.readSetup(ctx); err != nil && ctx.Err() == nil {
				a.log.Warn("reading the machine's set-up", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return a, nil
}

// httpClient trusts the certificates in caFile, or the system's.
func httpClient(caFile string) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ForceAttemptHTTP2 = true
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("agent: CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("agent: CA file %s holds no PEM certificate", caFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr}, nil
}

// Client returns the agent's API client.
func (a *Agent) Client() *Client { return a.client }

// Logger returns the agent's logger.
func (a *Agent) Logger() *slog.Logger { return a.log }

// Handle registers h for the server's command op, replacing any before.
func (a *Agent) Handle(op string, h Handler) {
	a.mu.Lock()
	a.handlers[op] = h
	a.mu.Unlock()
}

// OnConnect registers fn to run (in its own goroutine) each time the
// channel connects.
func (a *Agent) OnConnect(fn func(ctx context.Context)) {
	a.mu.Lock()
	a.onConnect = append(a.onConnect, fn)
	a.mu.Unlock()
}

// MachineID returns the machine's id, known once the channel connected.
func (a *Agent) MachineID() uint64 { return a.client.State().MachineID }

// Run keeps the channel to the server until ctx ends, reconnecting with
// exponential backoff and jitter. It returns ctx's error, or ErrSignIn
// when the server refuses the machine's credentials for good.
func (a *Agent) Run(ctx context.Context) error {
	wait := a.cfg.MinBackoff
	for {
		start := time.Now()
		err := a.channel(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, ErrSignIn) {
			return err
		}
		if time.Since(start) > 2*a.cfg.MaxBackoff {
			wait = a.cfg.MinBackoff // it was up a good while: start over
		}
		d := wait/2 + rand.N(wait/2+1)
		var cv *tls.CertificateVerificationError
		if errors.As(err, &cv) {
			// Retried like any failure (the server's certificate may
			// be mended), but Go's text says what failed, not what to
			// do about it.
			a.log.Warn("channel ended; reconnecting", "err", err, "in", d,
				"fix", "the server's certificate is not trusted: name it, or the authority that signs it, with --ca-file (a self-signed berth's is DATA/tls/cert.pem)")
		} else {
			a.log.Warn("channel ended; reconnecting", "err", err, "in", d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
		wait = min(2*wait, a.cfg.MaxBackoff)
	}
}

// heartbeatTimeout is how long the channel may be silent before the
// agent gives it up as dead; the server pings more often (docs/agent.md).
const heartbeatTimeout = 75 * time.Second

// channel holds one channel request and serves its commands until it
// ends.
func (a *Agent) channel(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.client.base+"/api/2/agent/channel?agent_version="+Version, nil)
	if err != nil {
		return err
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return err
	}
	if err := CheckResponse(resp); err != nil {
		return err
	}
	defer resp.Body.Close()
	// A watchdog ends the request when the server falls silent: a
	// half-open TCP connection would otherwise hold the agent forever.
	alive := make(chan struct{}, 1)
	go func() {
		t := time.NewTimer(heartbeatTimeout)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-alive:
				t.Reset(heartbeatTimeout)
			case <-t.C:
				a.log.Warn("channel silent; dropping it")
				cancel()
				return
			}
		}
	}()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		select {
		case alive <- struct{}{}:
		default:
		}
		var cmd struct {
			ID   string          `json:"id"`
			Op   string          `json:"op"`
			Args json.RawMessage `json:"args"`
		}
		if err := json.Unmarshal(sc.Bytes(), &cmd); err != nil {
			return fmt.Errorf("agent: channel: %w", err)
		}
		if cmd.Op == "hello" {
			var h struct {
				MachineID uint64 `json:"machine_id"`
			}
			if err := json.Unmarshal(cmd.Args, &h); err != nil || h.MachineID == 0 {
				return fmt.Errorf("agent: channel: a hello without machine_id")
			}
			if err := a.client.setMachineID(h.MachineID); err != nil {
				return err
			}
			a.log.Info("connected", "machine_id", h.MachineID)
			a.mu.Lock()
			fns := append([]func(context.Context){}, a.onConnect...)
			a.mu.Unlock()
			for _, fn := range fns {
				go fn(ctx)
			}
			continue
		}
		go a.serve(ctx, cmd.ID, cmd.Op, cmd.Args)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.ErrUnexpectedEOF
}

// serve runs one command and, when it has an id, posts its answer.
func (a *Agent) serve(ctx context.Context, id, op string, args json.RawMessage) {
	a.mu.Lock()
	h := a.handlers[op]
	a.mu.Unlock()
	var result any
	var err error
	if h == nil {
		err = &APIError{Code: "invalid_request", Description: "this agent does not know the command " + op}
	} else {
		result, err = h(ctx, args)
	}
	if id == "" {
		if err != nil {
			a.log.Warn("command failed", "op", op, "err", err)
		}
		return
	}
	var reply struct {
		Result any       `json:"result,omitempty"`
		Error  *APIError `json:"error,omitempty"`
	}
	if err != nil {
		var ae *APIError
		if !errors.As(err, &ae) {
			ae = &APIError{Code: "unknown", Description: err.Error()}
		}
		reply.Error = ae
	} else {
		reply.Result = result
	}
	if err := a.client.PostJSON(ctx, "/api/2/agent/reply/"+id, reply, nil); err != nil {
		a.log.Warn("answer not delivered", "op", op, "err", err)
	}
}
