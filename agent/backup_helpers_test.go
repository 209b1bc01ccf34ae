package agent

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"berth/agent/agenttest"
)

// startBackupAgent runs an agent in the test process for person p, with
// its state under dir, sets up a backup of src and waits for the backup's
// first run to end; it returns the agent, the backup's job and the path
// of its run report. The agent stops when tb ends.
func startBackupAgent(tb testing.TB, srv *agenttest.Server, p agenttest.Person, dir, src string) (*Agent, *backupJob, string) {
	tb.Helper()
	a, err := Start(Config{Server: srv.URL, Login: p.Login, StateFile: filepath.Join(dir, "state", "state.json"),
		CAFile: srv.CAFile, BackupInterval: 24 * time.Hour, Password: func() (string, error) { return p.Password, nil }})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	go a.Run(ctx)
	for deadline := time.Now().Add(time.Minute); a.MachineID() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			tb.Fatal("the agent did not connect within a minute")
		}
	}
	var bk struct {
		ID uint64 `json:"id"`
	}
	srv.JSON(tb, p.Token, http.MethodPost, fmt.Sprintf("/api/2/machine/%d/backups/create", a.MachineID()), url.Values{"path": {src}}, &bk)
	report := filepath.Join(dir, "state", fmt.Sprintf("backup-%d", bk.ID), "last-run.json")
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(report); err == nil {
			break
		}
		if time.Now().After(deadline) {
			tb.Fatal("the first run did not end")
		}
	}
	a.backups.mu.Lock()
	defer a.backups.mu.Unlock()
	return a, a.backups.jobs[bk.ID], report
}
