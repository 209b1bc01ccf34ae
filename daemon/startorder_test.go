package daemon

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth/account"
	"berth/config"
)

// TestFailedStartRunsNoFirstRun: a first start that cannot serve (its
// port is taken, its configured certificate cannot be read) fails before
// it creates the organization and prints the one-time password. The
// operator fixes the setting and starts again, and that start is the
// first run, with the password printed then, not lost in the scrollback
// of a failed attempt.
func TestFailedStartRunsNoFirstRun(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	// A directory passes the configuration's existence check but is no
	// certificate, as is a key file only root may read under systemd.
	certDir := t.TempDir()

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		// The key comes first, as in the configuration's own errors, so
		// the operator knows which setting to change.
		{"port in use", []string{"--listen", taken.Addr().String()}, "listen: https listener: listen tcp " + taken.Addr().String() + ": bind: address already in use"},
		{"metrics port in use", []string{"--listen", "127.0.0.1:0", "--metrics-listen", taken.Addr().String()}, "metrics_listen: metrics listener: listen tcp"},
		{"unreadable certificate", []string{"--listen", "127.0.0.1:0", "--tls-cert", certDir, "--tls-key", certDir}, certDir},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			args := append([]string{"serve", "--data", data, "--metrics-listen", "", "--http-listen", ""}, tc.args...)
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), args, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("serve %v: %v, want an error naming %q", tc.args, err, tc.want)
			}
			if strings.Contains(stderr.String(), "first start") {
				t.Errorf("a failed start printed the first-run message:\n%s", stderr.String())
			}
			if _, err := os.Stat(filepath.Join(data, initialPasswordFile)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a failed start left %s: %v", initialPasswordFile, err)
			}
			assertNoOrganization(t, data)
		})
	}
}

// assertNoOrganization fails when the data directory holds an
// organization, that is when a first run has happened there.
func assertNoOrganization(t *testing.T, data string) {
	t.Helper()
	cfg := config.Default()
	cfg.Data = data
	log := slog.New(slog.DiscardHandler)
	st, err := openStores(context.Background(), cfg, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close(log)
	has, err := account.New(st.db, accountOptions(cfg)).HasOrganizations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if has {
		t.Error("a failed start created the first organization")
	}
}

// TestDataDirectoryNotCreatable: a data directory that cannot be made
// (here a path below a regular file, which fails for root too) fails the
// start with the path and the cause.
func TestDataDirectoryNotCreatable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(file, "data")
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"serve", "--data", data, "--listen", "127.0.0.1:0", "--metrics-listen", ""}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("serve --data %s: %v, want an error naming %s and the cause", data, err, file)
	}
}
