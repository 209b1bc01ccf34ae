package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
)

// Mapping is one of the machine's mapped folders, as GET
// /api/2/machine/<id>/mappings gives it (spec 2.13).
type Mapping struct {
	ID       uint64  `json:"id"`
	Name     string  `json:"name"`
	Path     string  `json:"path"`
	PersonID *uint64 `json:"person_id"`
	RootID   uint64  `json:"root_id"`
	Share    bool    `json:"share"`
}

// Backup is one of the machine's backups, as GET
// /api/2/machine/<id>/backups gives it (spec 2.14); ID is the backup
// root's id.
type Backup struct {
	ID   uint64 `json:"id"`
	Path string `json:"path"`
}

// Setup is what the machine's owner set up for it: what the agent keeps
// in step. It is read from the server when the channel connects and on
// every reconfigure notice.
type Setup struct {
	// Mappings are the mappings in force (GET .../mappings/active).
	Mappings []Mapping
	// Paused are the others: the machine's file server is off, or the
	// policy withholds file_server_enabled. Their syncs stop and keep
	// their indexes, to go on where they were when both are back.
	Paused  []Mapping
	Backups []Backup
}

// Folders are the local folders the setup names: what ls may list and
// restores may write below (docs/agent.md). A paused mapping's folder is
// one of them, as the server's check of ls counts every mapping: without
// it the agent refused (403) a listing the server had let through.
func (s Setup) Folders() []string {
	var out []string
	for _, m := range slices.Concat(s.Mappings, s.Paused) {
		out = append(out, localPath(m.Path))
	}
	for _, b := range s.Backups {
		out = append(out, localPath(b.Path))
	}
	return out
}

// localPath turns the server's form of a machine path (slashes; /C:/x
// for a Windows drive) into this machine's.
func localPath(p string) string {
	if len(p) >= 3 && p[0] == '/' && p[2] == ':' {
		return p[1:]
	}
	return p
}

// Subscription is one line of the status command's subscriptions (spec
// 4.11): a folder the agent keeps in step with a root.
type Subscription struct {
	ExclFiles    int64  `json:"excl_files"`
	RsubID       uint64 `json:"rsub_id"`
	Synced       bool   `json:"synced"`
	SyncedFolder string `json:"synced_folder"`
}

// Transfer is one transfer in progress, in the status command's
// transfers (its fields are berth's: docs/agent.md).
type Transfer struct {
	Kind   string `json:"kind"` // backup, restore, upload, download
	RootID uint64 `json:"root_id"`
	Path   string `json:"path"`
	Bytes  int64  `json:"bytes"`
	Total  int64  `json:"total"`
}

// StatusFunc is a feature's part of the status command.
type StatusFunc func() ([]Subscription, []Transfer)

type setupState struct {
	mu      sync.Mutex
	cur     Setup
	known   bool
	onSetup []func(ctx context.Context, s Setup)
	status  []StatusFunc

	// begun numbers the reads of the set-up as they start; applying
	// holds the one being applied, and applied is its number. A read
	// that began before one already applied is dropped: the read at a
	// connection and a reconfigure notice's run at once, and the older
	// one, finished last, undid a mapping made as the agent connected.
	begun    atomic.Uint64
	applying sync.Mutex
	applied  uint64
}

// Setup returns the machine's set-up as last read (and whether it was
// read yet).
func (a *Agent) Setup() (Setup, bool) {
	a.setup.mu.Lock()
	defer a.setup.mu.Unlock()
	return a.setup.cur, a.setup.known
}

// OnSetup registers fn, called (in the agent's goroutine that read it)
// with every set-up read from the server, so a feature starts, changes
// or stops what it keeps in step. fn must return quickly.
func (a *Agent) OnSetup(fn func(ctx context.Context, s Setup)) {
	a.setup.mu.Lock()
	a.setup.onSetup = append(a.setup.onSetup, fn)
	a.setup.mu.Unlock()
}

// AddStatus registers a feature's part of the status command.
func (a *Agent) AddStatus(fn StatusFunc) {
	a.setup.mu.Lock()
	a.setup.status = append(a.setup.status, fn)
	a.setup.mu.Unlock()
}

// readSetup reads the machine's mappings and backups and hands them to
// the features.
func (a *Agent) readSetup(ctx context.Context) error {
	id := a.MachineID()
	if id == 0 {
		return fmt.Errorf("agent: the machine's id is not known yet")
	}
	seq := a.setup.begun.Add(1)
	var ms, active struct {
		Results []Mapping `json:"results"`
	}
	if err := a.client.GetJSON(ctx, fmt.Sprintf("/api/2/machine/%d/mappings", id), &ms); err != nil {
		return err
	}
	err := a.client.GetJSON(ctx, fmt.Sprintf("/api/2/machine/%d/mappings/active", id), &active)
	var ae *APIError
	switch {
	case errors.As(err, &ae) && ae.Status == http.StatusNotFound:
		// A server of a release before /mappings/active (the machine
		// itself was just found by /mappings): every mapping is in
		// force, as that server has it. Failing here read no set-up
		// at all, and neither mappings nor backups ran.
		active.Results = ms.Results
	case err != nil:
		return err
	}
	var bs struct {
		Results []Backup `json:"results"`
	}
	if err := a.client.GetJSON(ctx, fmt.Sprintf("/api/2/machine/%d/backups", id), &bs); err != nil {
		return err
	}
	s := Setup{Mappings: active.Results, Backups: bs.Results}
	for _, m := range ms.Results {
		if !slices.ContainsFunc(s.Mappings, func(x Mapping) bool { return x.ID == m.ID }) {
			s.Paused = append(s.Paused, m)
		}
	}
	a.setup.applying.Lock()
	defer a.setup.applying.Unlock()
	if seq < a.setup.applied {
		return nil // a read begun after this one was applied
	}
	a.setup.applied = seq
	a.setup.mu.Lock()
	a.setup.cur, a.setup.known = s, true
	fns := append([]func(context.Context, Setup){}, a.setup.onSetup...)
	a.setup.mu.Unlock()
	for _, fn := range fns {
		fn(ctx, s)
	}
	return nil
}

// statusResult answers the status command: every feature's subscriptions
// and transfers; synced when every subscription is.
func (a *Agent) statusResult(context.Context, json.RawMessage) (any, error) {
	a.setup.mu.Lock()
	fns := append([]StatusFunc{}, a.setup.status...)
	a.setup.mu.Unlock()
	out := struct {
		Subscriptions []Subscription `json:"subscriptions"`
		Synced        bool           `json:"synced"`
		Transfers     []Transfer     `json:"transfers"`
	}{Subscriptions: []Subscription{}, Synced: true, Transfers: []Transfer{}}
	for _, fn := range fns {
		subs, trs := fn()
		for _, s := range subs {
			out.Synced = out.Synced && s.Synced
		}
		out.Subscriptions = append(out.Subscriptions, subs...)
		out.Transfers = append(out.Transfers, trs...)
	}
	return out, nil
}
