package agent

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth/berthtest"
)

// TestUntrustedServerSaysWhy: an agent started without --ca-file against
// a server whose certificate the system does not trust (a self-signed
// berth, the first thing a new administrator runs it against) keeps
// retrying, as for any failure that a fix on the server can end, and
// says in each warning which flag trusts the certificate.
func TestUntrustedServerSaysWhy(t *testing.T) {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	var logs berthtest.LogBuffer
	a, err := New(Config{
		Server: srv.URL, Login: "alice", StateFile: filepath.Join(t.TempDir(), "state.json"),
		Password:   func() (string, error) { return "a password", nil },
		Logger:     slog.New(slog.NewTextHandler(&logs, nil)),
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	if err := a.Run(ctx); err != context.DeadlineExceeded {
		t.Fatalf("Run: %v, want it to retry until stopped", err)
	}
	if out := logs.String(); !strings.Contains(out, "certificate") || !strings.Contains(out, "--ca-file") {
		t.Errorf("the agent's warnings name no fix (--ca-file):\n%s", out)
	}
}
