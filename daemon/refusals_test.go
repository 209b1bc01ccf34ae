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
	"syscall"
	"testing"

	"berth/account"
	"berth/config"

	"berth/berthtest"
)

// TestServeRefused: a start that cannot work fails at once, in process,
// with an error that names the setting or path at fault and the cause.
// One that fails before it serves (a port is taken, the configured
// certificate cannot be read) has also created no organization and
// printed no one-time password: the operator fixes the setting and starts
// again, and that start is the first run, with the password printed then,
// not lost in the scrollback of a failed attempt (TestFailedStartRunsNoFirstRun).
func TestServeRefused(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	// A directory passes the configuration's existence check but is no
	// certificate, as is a key file only root may read under systemd.
	certDir := t.TempDir()
	// A data directory below a regular file cannot be made, for root too.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		data string // "" for a new directory, where no first run may happen
		args []string
		want []string // each in the error
	}{
		// The key comes first, as in the configuration's own errors, so
		// the operator knows which setting to change.
		{name: "port in use", args: []string{"--metrics-listen", "", "--http-listen", "", "--listen", taken.Addr().String()},
			want: []string{"listen: https listener: listen tcp " + taken.Addr().String() + ": bind: address already in use",
				"another program (or berth) listens there: stop it, or choose another address (listen, --listen)"}},
		{name: "metrics port in use", args: []string{"--metrics-listen", "", "--http-listen", "", "--listen", "127.0.0.1:0", "--metrics-listen", taken.Addr().String()},
			want: []string{"metrics_listen: metrics listener: listen tcp", "(metrics_listen, --metrics-listen)"}},
		{name: "unreadable certificate", args: []string{"--metrics-listen", "", "--http-listen", "", "--listen", "127.0.0.1:0", "--tls-cert", certDir, "--tls-key", certDir},
			want: []string{certDir}},
		// TestBadConfigNamesKeyAndValue.
		{name: "bad listen address", args: []string{"--listen", "abc"},
			want: []string{`listen: "abc" is not host:port`}},
		// TestDataDirectoryNotCreatable: the path and the cause.
		{name: "data directory not creatable", data: filepath.Join(file, "data"), args: []string{"--listen", "127.0.0.1:0", "--metrics-listen", ""},
			want: []string{file, "not a directory"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := tc.data
			if data == "" {
				data = filepath.Join(t.TempDir(), "data")
			}
			args := append([]string{"serve", "--data", data}, tc.args...)
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), args, &stdout, &stderr)
			for _, want := range tc.want {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("serve %v: %v, want an error naming %q", args[1:], err, want)
				}
			}
			if tc.data != "" {
				return
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

// TestStartRefusalsNameTheProblem: a start that cannot work fails at once
// with a message that names what is wrong, and only that.
func TestStartRefusalsNameTheProblem(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	bin := berthtest.BuildBerth(t)
	data := filepath.Join(t.TempDir(), "data")
	p := startDaemon(t, bin, data)

	t.Run("data directory in use", func(t *testing.T) {
		out := startFails(t, bin, nil, "--data", data)
		if !strings.Contains(out, "in use by another") {
			t.Errorf("a second berth on the same data directory printed:\n%s", out)
		}
	})
	t.Run("port in use", func(t *testing.T) {
		out := startFails(t, bin, nil, "--data", filepath.Join(t.TempDir(), "d"), "--listen", p.addrs["https"])
		if !strings.Contains(out, "https listener") || !strings.Contains(out, "address already in use") {
			t.Errorf("a taken port printed:\n%s", out)
		}
	})
	p.stop(t)

	t.Run("unreadable data directory", func(t *testing.T) {
		// A data directory made by another user (root, say, running
		// berth by hand before the service did).
		var cred *syscall.Credential
		if os.Geteuid() == 0 {
			cred = &syscall.Credential{Uid: 65534, Gid: 65534}
			// Let nobody reach the binary.
			for dir := filepath.Dir(bin); dir != os.TempDir() && dir != "/"; dir = filepath.Dir(dir) {
				os.Chmod(dir, 0o755)
			}
		} else {
			if err := os.Chmod(filepath.Join(data, "meta"), 0); err != nil {
				t.Fatal(err)
			}
			defer os.Chmod(filepath.Join(data, "meta"), 0o700)
		}
		out := startFails(t, bin, cred, "--data", data)
		if !strings.Contains(out, "permission denied") || strings.Contains(out, "another berth") {
			t.Errorf("a data directory berth may not open printed:\n%s", out)
		}
		// The fix, not only the refusal: whose the directory must be,
		// and the command that makes it so.
		if !strings.Contains(out, "chown -R") || !strings.Contains(out, data) || !strings.Contains(out, "--data") {
			t.Errorf("a data directory berth may not open printed no fix (chown -R, the directory, --data):\n%s", out)
		}
	})
	t.Run("corrupt TLS key", func(t *testing.T) {
		key := filepath.Join(data, "tls", "key.pem")
		good, err := os.ReadFile(key)
		if err != nil {
			t.Fatal(err)
		}
		defer os.WriteFile(key, good, 0o600)
		if err := os.WriteFile(key, []byte("not a key\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		out := startFails(t, bin, nil, "--data", data)
		if !strings.Contains(out, key) {
			t.Errorf("a corrupt TLS key printed a message without its name %s:\n%s", key, out)
		}
	})
	t.Run("missing configured TLS key", func(t *testing.T) {
		key := filepath.Join(t.TempDir(), "missing.pem")
		out := startFails(t, bin, nil, "--data", data, "--tls-cert", filepath.Join(data, "tls", "cert.pem"), "--tls-key", key)
		if !strings.Contains(out, "tls.key") || !strings.Contains(out, key) {
			t.Errorf("a missing TLS key printed:\n%s", out)
		}
	})
}
