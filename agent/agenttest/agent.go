package agenttest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Agent is one `berth agent` process standing for one machine: its own
// temporary folder (Dir), with the state file and a home folder in it,
// signed in as one person. It is not running until Start.
type Agent struct {
	// Dir is the machine's own folder: put the folders it backs up or
	// maps below it (Path).
	Dir string
	// StateFile is the agent's --state-file, in Dir.
	StateFile string
	// Person is who the agent signs in as.
	Person Person
	// Env holds extra environment variables for the next Start, such as
	// "BERTH_AGENT_AUTH_CODE=123456".
	Env []string
	// Args holds extra command-line flags for the next Start.
	Args []string

	srv   *Server
	owner testing.TB // the test that made it
	p     *proc
}

// NewAgent returns an agent for person p with a new temporary folder;
// Start runs it.
func (s *Server) NewAgent(tb testing.TB, p Person) *Agent {
	tb.Helper()
	dir := tb.TempDir()
	for _, d := range []string{"files", "home"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			tb.Fatal(err)
		}
	}
	return &Agent{Dir: dir, StateFile: filepath.Join(dir, "state", "state.json"), Person: p, srv: s, owner: tb}
}

// Path is a path below the agent's folder Dir/files, the place for the
// machine's own files (the folder exists; the path need not).
func (a *Agent) Path(elem ...string) string {
	return filepath.Join(append([]string{a.Dir, "files"}, elem...)...)
}

// Start runs `berth agent` (debug log) for the agent's person, with the
// password in $BERTH_AGENT_PASSWORD; it does not wait for the channel
// (WaitOnline does). Starting a running agent fails the test.
func (a *Agent) Start(tb testing.TB) {
	tb.Helper()
	if a.p != nil && a.p.running() {
		tb.Fatal("agenttest: the agent is already running")
	}
	args := append([]string{"agent", "--server", a.srv.URL, "--login", a.Person.Login,
		"--state-file", a.StateFile, "--ca-file", a.srv.CAFile, "--log-level", "debug"}, a.Args...)
	env := append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Join(a.Dir, "home"),
		"BERTH_AGENT_PASSWORD=" + a.Person.Password}, a.Env...)
	a.p = start(tb, a.owner, a.srv.bin, args, env, nil)
}

// Running reports whether the agent's process is running.
func (a *Agent) Running() bool { return a.p != nil && a.p.running() }

// Output is what the agent logged in its latest run.
func (a *Agent) Output() string {
	if a.p == nil {
		return ""
	}
	return a.p.output()
}

// Stop stops the agent with SIGTERM and waits for its clean exit.
func (a *Agent) Stop(tb testing.TB) {
	tb.Helper()
	if a.p == nil {
		return
	}
	if err := a.p.stop(); err != nil {
		tb.Fatalf("agenttest: berth agent: %v:\n%s", err, a.p.output())
	}
}

// Kill stops the agent with SIGKILL, as a crash or a power cut would.
func (a *Agent) Kill(tb testing.TB) {
	tb.Helper()
	if a.p != nil {
		a.p.kill()
	}
}

// Restart stops the agent (SIGTERM) if it runs and starts it again with
// the same folder and state file: the same machine.
func (a *Agent) Restart(tb testing.TB) {
	tb.Helper()
	a.Stop(tb)
	a.Start(tb)
}

// Wait waits up to d for the agent to exit by itself and returns its
// exit error (nil: a clean exit); it fails the test if the agent still
// runs after d.
func (a *Agent) Wait(tb testing.TB, d time.Duration) error {
	tb.Helper()
	if a.p == nil {
		tb.Fatal("agenttest: the agent was never started")
	}
	select {
	case <-a.p.done:
		return a.p.err
	case <-time.After(d):
		tb.Fatalf("agenttest: the agent still runs after %v:\n%s", d, a.p.output())
		return nil
	}
}

// State is the agent's state file, as the agent writes it.
type State struct {
	Server       string `json:"server"`
	Login        string `json:"login"`
	GUID         string `json:"guid"`
	MachineID    uint64 `json:"machine_id"`
	RefreshToken string `json:"refresh_token"`
}

// State reads the agent's state file; ok is false while it does not
// exist.
func (a *Agent) State(tb testing.TB) (st State, ok bool) {
	tb.Helper()
	b, err := os.ReadFile(a.StateFile)
	if errors.Is(err, fs.ErrNotExist) {
		return st, false
	}
	if err != nil {
		tb.Fatal(err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		tb.Fatalf("agenttest: state file %s: %v", a.StateFile, err)
	}
	return st, true
}

// MachineID is the machine's id from the state file (0 before the
// agent's first channel).
func (a *Agent) MachineID(tb testing.TB) uint64 {
	tb.Helper()
	st, _ := a.State(tb)
	return st.MachineID
}

// onlineTimeout bounds WaitOnline: a start, a sign-in (argon2id), and
// possibly a reconnect's backoff.
const onlineTimeout = 90 * time.Second

// WaitOnline waits until the agent's channel is up, that is until GET
// /api/2/machine/<id>/status answers 200 to the person, and returns the
// machine's id. It fails the test if the agent exits or does not come
// online in time.
func (a *Agent) WaitOnline(tb testing.TB) uint64 {
	tb.Helper()
	deadline := time.Now().Add(onlineTimeout)
	last := ""
	for time.Now().Before(deadline) {
		if !a.Running() {
			tb.Fatalf("agenttest: the agent exited (%v) before coming online:\n%s", a.p.err, a.p.output())
		}
		if id := a.MachineID(tb); id != 0 {
			status, body := a.srv.Do(tb, a.Person.Token, http.MethodGet, fmt.Sprintf("/api/2/machine/%d/status", id), nil)
			if status == http.StatusOK {
				return id
			}
			last = fmt.Sprintf("%d %s", status, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	tb.Fatalf("agenttest: the agent did not come online within %v (last status: %s):\n%s", onlineTimeout, last, a.Output())
	return 0
}

// WaitOffline waits until the server counts machine id offline: its
// status answers 503.
func (a *Agent) WaitOffline(tb testing.TB, id uint64) {
	tb.Helper()
	deadline := time.Now().Add(onlineTimeout)
	for time.Now().Before(deadline) {
		status, _ := a.srv.Do(tb, a.Person.Token, http.MethodGet, fmt.Sprintf("/api/2/machine/%d/status", id), nil)
		if status == http.StatusServiceUnavailable {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	tb.Fatalf("agenttest: machine %d still online after %v", id, onlineTimeout)
}
