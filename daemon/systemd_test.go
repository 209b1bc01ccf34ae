package daemon

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"berth/kv"
	"berth/kv/badger"

	"berth/berthtest"
)

const unitFile = "../systemd/berth.service"

// unitFiles are the unit files systemd-analyze verifies.
var unitFiles = []string{unitFile, "../systemd/berth-agent.service", "../systemd/berth-agent-user.service"}

// TestUnitVerifies runs systemd-analyze verify on berth.service and the
// agent's units. verify insists that ExecStart's binary exists, so the
// test points it at a stand-in in a temporary directory. Warnings (an unknown or misspelt directive) fail
// the test too: verify itself only fails on hard errors. The user unit is
// verified as a system unit would be: `--user` needs a running user
// manager, and the directives it uses mean the same in both.
func TestUnitVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed (apt-get install systemd); skipping the unit check")
	}
	for _, file := range unitFiles {
		t.Run(filepath.Base(file), func(t *testing.T) { verifyUnit(t, analyze, file) })
	}
}

func verifyUnit(t *testing.T, analyze, file string) {
	unit, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "berth")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(unit, []byte("/usr/local/bin/berth")) {
		t.Fatal("ExecStart no longer names /usr/local/bin/berth; update this test")
	}
	name := filepath.Base(file)
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, bytes.ReplaceAll(unit, []byte("/usr/local/bin/berth"), []byte(bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(analyze, "verify", "--man=no", path)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	// Outside a booted systemd (containers) verify may complain about the
	// environment, not the unit; only lines naming our file count.
	var problems []string
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, name) {
			problems = append(problems, line)
		}
	}
	if err != nil || len(problems) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out.String())
	}
}

// TestAgentUnitEssentials pins what `berth agent` relies on in its
// units: its state directory, the secrets from an environment file, no
// restart loop after a refused sign-in (exit 3), and, for the system
// unit, the hardening of berth.service.
func TestAgentUnitEssentials(t *testing.T) {
	common := []string{"Type=exec", "StateDirectory=berth-agent", "StateDirectoryMode=0700", "EnvironmentFile=",
		"ExecStart=/usr/local/bin/berth agent --server ${BERTH_AGENT_SERVER} --login ${BERTH_AGENT_LOGIN} --ca-file=${BERTH_AGENT_CA_FILE}",
		"Restart=on-failure", "RestartPreventExitStatus=3", "UMask=0077", "NoNewPrivileges=yes"}
	for file, extra := range map[string][]string{
		"../systemd/berth-agent.service": {"DynamicUser=yes", "ProtectSystem=strict", "ProtectHome=read-only", "PrivateTmp=yes",
			"PrivateDevices=yes", "CapabilityBoundingSet=\n", "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX",
			"SystemCallFilter=@system-service", "WantedBy=multi-user.target"},
		"../systemd/berth-agent-user.service": {"WantedBy=default.target"},
	} {
		unit, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range append(common, extra...) {
			if !bytes.Contains(unit, []byte("\n"+want)) {
				t.Errorf("%s lacks %q", file, want)
			}
		}
	}
}

// TestUnitEssentials pins the settings the daemon's behaviour relies on.
func TestUnitEssentials(t *testing.T) {
	unit, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Type=notify", "NotifyAccess=main", "WatchdogSec=", "User=berth", "StateDirectory=berth",
		"ExecStart=/usr/local/bin/berth serve --config /etc/berth/berth.yaml --data /var/lib/berth",
		"Restart=on-failure", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes",
		"NoNewPrivileges=yes", "PrivateDevices=yes", "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX",
		"LimitNOFILE=",
	} {
		if !bytes.Contains(unit, []byte("\n"+want)) {
			t.Errorf("berth.service lacks %q", want)
		}
	}
	for _, f := range []string{"../systemd/berth.sysusers", "../systemd/berth.tmpfiles", "../systemd/berth.yaml"} {
		if _, err := os.Stat(f); err != nil {
			t.Error(err)
		}
	}
}

// TestSystemdNotify: under systemd (NOTIFY_SOCKET, WATCHDOG_USEC) the real
// binary sends READY=1 once its listener accepts, WATCHDOG=1 pings at half
// the watchdog interval, and STOPPING=1 at SIGTERM before it exits 0.
func TestSystemdNotify(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	bin := berthtest.BuildBerth(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Skipf("no unixgram socket: %v", err)
	}
	defer conn.Close()
	msgs := make(chan string, 100)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				close(msgs)
				return
			}
			msgs <- string(buf[:n])
		}
	}()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "serve", "--data", filepath.Join(dir, "data"), "--listen", addr, "--metrics-listen", "")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "NOTIFY_SOCKET=" + sock, "WATCHDOG_USEC=1000000"}
	var out lockedBuffer
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	next := func(want string) {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case m := <-msgs:
				if strings.Contains(m, want) {
					return
				}
			case <-timeout:
				t.Fatalf("no %s within 30s:\n%s", want, out.String())
			}
		}
	}
	next("READY=1")
	// READY means the listener accepts.
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatalf("READY=1 sent, but %s refuses: %v", addr, err)
	}
	c.Close()
	start := time.Now()
	next("WATCHDOG=1")
	next("WATCHDOG=1")
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("two watchdog pings took %v with WATCHDOG_USEC=1s", d)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	next("STOPPING=1")
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit after SIGTERM: %v\n%s", err, out.String())
	}
}

// notifySocket listens where sd_notify writes, for the test's duration,
// and points NOTIFY_SOCKET at it, as systemd does for a Type=notify unit;
// it skips where unixgram sockets are not allowed.
func notifySocket(t *testing.T) *net.UnixConn {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Skipf("no unixgram socket: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", sock)
	return conn
}

// TestExtendStartTimeout: while the stores open (a recovery sweep can take
// longer than systemd's start timeout), berth asks systemd for more time
// at every period, and stops asking once started.
func TestExtendStartTimeout(t *testing.T) {
	conn := notifySocket(t)
	ctx, started := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		extendStartTimeout(ctx, 20*time.Millisecond, slog.New(slog.DiscardHandler))
	}()
	buf := make([]byte, 4096)
	for range 2 {
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("no EXTEND_TIMEOUT_USEC message: %v", err)
		}
		if m := string(buf[:n]); !strings.Contains(m, "EXTEND_TIMEOUT_USEC=60000\n") || !strings.Contains(m, "STATUS=") {
			t.Fatalf("message %q, want EXTEND_TIMEOUT_USEC=60000 (three periods) and a STATUS", m)
		}
	}
	started()
	<-done
	// Drain what was sent before the stop, then expect silence.
	for {
		conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := conn.Read(buf); err != nil {
			break
		}
	}
	conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, err := conn.Read(buf); err == nil {
		t.Fatalf("still asking after the start: %q", buf[:n])
	}
}

// TestWatchdog: the watchdog pings systemd while the metadata store
// answers and takes writes, and stops pinging, so that systemd restarts
// berth, once the store is closed or its engine reports that it stopped
// taking writes (kv.Failer: Badger after a lost fsync). An engine without
// that ability (kv.Store alone, as a SQL engine may be) is judged by its
// answers only. The store is a real Badger in every row.
func TestWatchdog(t *testing.T) {
	errLost := errors.New("fsync lost")
	for _, tc := range []struct {
		name  string
		store func(db *badger.DB) kv.Store
		pings bool
		// failure is what failed reports for the store.
		failure error
	}{
		{"a healthy Badger", func(db *badger.DB) kv.Store { return db }, true, nil},
		{"an engine without Failed or RunGC", func(db *badger.DB) kv.Store { return struct{ kv.Store }{db} }, true, nil},
		{"an engine that stopped taking writes", func(db *badger.DB) kv.Store { return failedStore{db, errLost} }, false, errLost},
		{"a closed store", func(db *badger.DB) kv.Store { db.Close(); return db }, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := notifySocket(t)
			t.Setenv("WATCHDOG_USEC", "40000") // a ping every 20 ms
			t.Setenv("WATCHDOG_PID", "")
			db, err := badger.Open(badger.Options{InMemory: true})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			s := tc.store(db)
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan struct{})
			go func() {
				defer close(done)
				watchdog(ctx, s, slog.New(slog.DiscardHandler))
			}()
			defer func() { cancel(); <-done }()
			if got := failed(s); !errors.Is(got, tc.failure) {
				t.Errorf("failed = %v, want %v", got, tc.failure)
			}
			buf := make([]byte, 4096)
			if tc.pings {
				for range 2 {
					conn.SetReadDeadline(time.Now().Add(10 * time.Second))
					n, err := conn.Read(buf)
					if err != nil || string(buf[:n]) != "WATCHDOG=1" {
						t.Fatalf("no WATCHDOG=1: %q %v", buf[:n], err)
					}
				}
				if err := runGC(ctx, s); err != nil {
					t.Errorf("runGC: %v", err)
				}
				return
			}
			// Ten periods of silence.
			conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			if n, err := conn.Read(buf); err == nil {
				t.Errorf("pinged %q with a store that cannot write", buf[:n])
			}
		})
	}
}

// failedStore is a real store whose engine reports, as Badger does after
// a lost fsync, that it takes no more writes.
type failedStore struct {
	kv.Store
	err error
}

func (f failedStore) Failed() error { return f.err }
