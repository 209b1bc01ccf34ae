// Package pgtest starts throwaway PostgreSQL servers for tests: the kv
// engine's conformance run (kv/postgres) and tests that want several
// berth nodes on one database. Only tests import it.
//
// A server runs from the binaries of a local installation (Debian's
// postgresql package: /usr/lib/postgresql/<version>/bin), listens on
// 127.0.0.1 on a free port and on a unix socket in its own temporary
// directory, keeps fsync on (what a server of berth's runs with), and is
// stopped and removed when the test that started it ends. PostgreSQL
// refuses to run as root, so when the test runs as root (CI does) the
// server runs as the system user "postgres" (which Debian's package
// creates).
//
// Without the binaries the test is skipped, unless BERTH_INTEROP=required
// (as in CI) makes that a failure, like berth's other interop tests.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is one running PostgreSQL server. Its methods are safe for
// concurrent use by parallel subtests.
type Server struct {
	// Port is the TCP port on 127.0.0.1.
	Port int
	// Dir is the temporary directory holding the data directory
	// ("data"), the unix socket and the server's log ("log").
	Dir string

	dbs atomic.Int64
}

// startTimeout bounds how long Start waits for a new server to accept
// connections: initdb and the first start take seconds on a loaded
// machine.
const startTimeout = 60 * time.Second

// Start starts a new server for tb and stops it, removing its files,
// when tb ends. It skips tb (or fails it under BERTH_INTEROP=required)
// when PostgreSQL is not installed, and fails it when the server does
// not start.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin, err := binDir()
	if err != nil {
		if os.Getenv("BERTH_INTEROP") == "required" {
			tb.Fatalf("PostgreSQL is not installed and BERTH_INTEROP=required (apt-get install postgresql): %v", err)
		}
		tb.Skipf("PostgreSQL is not installed; skipping (apt-get install postgresql, or set BERTH_INTEROP=required to fail instead): %v", err)
	}
	cred, err := credential()
	if err != nil {
		tb.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "berth-pg-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			tb.Fatal(err)
		}
	}
	data := filepath.Join(dir, "data")
	initdb := command(bin, "initdb", cred, dir, "-D", data, "-U", "postgres", "--auth=trust",
		"--encoding=UTF8", "--no-locale", "--no-sync")
	if out, err := initdb.CombinedOutput(); err != nil {
		tb.Fatalf("pgtest: initdb: %v\n%s", err, out)
	}

	// A port found free may be taken before the server binds it: try a
	// few.
	for range 5 {
		s, retry, err := start(bin, cred, dir, data)
		if err == nil {
			tb.Cleanup(s.stop)
			return s.Server
		}
		if !retry {
			tb.Fatal(err)
		}
	}
	tb.Fatal("pgtest: no free port was left free long enough for the server")
	return nil
}

// running is a Server and its process.
type running struct {
	*Server
	cmd  *exec.Cmd
	done chan struct{}
}

// start starts postgres on a free port; retry reports that it failed
// because the port was taken meanwhile.
func start(bin string, cred *syscall.Credential, dir, data string) (*running, bool, error) {
	port, err := freePort()
	if err != nil {
		return nil, false, err
	}
	logPath := filepath.Join(dir, "log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, false, err
	}
	defer logf.Close()
	cmd := command(bin, "postgres", cred, dir, "-D", data,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "port="+strconv.Itoa(port),
		"-c", "unix_socket_directories="+dir,
		"-c", "fsync=on",
		"-c", "max_connections=300",
		// The conformance suite opens a database per subtest, in
		// parallel; a serializable workload needs room for its
		// predicate locks.
		"-c", "max_pred_locks_per_transaction=256",
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	// A test binary killed (its -timeout, a ^C) runs no cleanup: the
	// kernel then stops the server (SIGQUIT: immediate shutdown), which
	// would otherwise outlive it on its port.
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGQUIT
	if err := cmd.Start(); err != nil {
		return nil, false, fmt.Errorf("pgtest: starting postgres: %w", err)
	}
	r := &running{Server: &Server{Port: port, Dir: dir}, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(r.done) }()

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, r.DSN("postgres"))
		if err == nil {
			conn.Close(ctx)
			return r, false, nil
		}
		select {
		case <-r.done:
			log, _ := os.ReadFile(logPath)
			return nil, strings.Contains(string(log), "Address already in use"),
				fmt.Errorf("pgtest: postgres exited at start: %s", log)
		case <-ctx.Done():
			r.stop()
			log, _ := os.ReadFile(logPath)
			return nil, false, fmt.Errorf("pgtest: postgres did not accept connections within %v: %v\n%s", startTimeout, err, log)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop asks for a fast shutdown (SIGINT: roll back what is in flight,
// write a checkpoint) and kills the server if it takes too long.
func (r *running) stop() {
	r.cmd.Process.Signal(os.Interrupt)
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		r.cmd.Process.Kill()
		<-r.done
	}
}

// DSN returns the connection string of database db on s, as the
// superuser "postgres" over TCP.
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.Port, db)
}

// NewDatabase creates a new, empty database on s and returns its DSN;
// each call gets its own, so parallel tests do not see each other's
// tables. It is dropped with the server.
func (s *Server) NewDatabase(tb testing.TB) string {
	tb.Helper()
	name := fmt.Sprintf("t%d", s.dbs.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		tb.Fatalf("pgtest: create database: %v", err)
	}
	return s.DSN(name)
}

// command returns the command running the named PostgreSQL program as
// cred's user (nil: as this process's), in dir.
func command(bin, name string, cred *syscall.Credential, dir string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(bin, name), args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C", "LC_ALL=C", "HOME=" + dir}
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	return cmd
}

// credential returns the user the server must run as: nil when this
// process is not root, else the system user "postgres" (which Debian's
// package creates).
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgtest: running as root, and PostgreSQL refuses to: the user to run it as, postgres, is missing: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// binDir finds the directory holding initdb and postgres: BERTH_PG_BIN,
// else the newest /usr/lib/postgresql/<version>/bin, else $PATH.
func binDir() (string, error) {
	if d := os.Getenv("BERTH_PG_BIN"); d != "" {
		return d, hasBinaries(d)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if hasBinaries(d) == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("postgres"); err == nil {
		d := filepath.Dir(p)
		return d, hasBinaries(d)
	}
	return "", errors.New("no initdb and postgres in /usr/lib/postgresql/*/bin, $BERTH_PG_BIN or $PATH")
}

func hasBinaries(dir string) error {
	for _, name := range []string{"initdb", "postgres"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
