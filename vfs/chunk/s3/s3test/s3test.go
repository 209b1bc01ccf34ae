// Package s3test starts a real S3 server for tests: versitygw serving a
// temporary directory through its posix backend, on loopback, with
// generated root credentials and an empty bucket. The chunk store's
// tests use it, and so can any test that needs berth on object storage
// (two nodes sharing one bucket start one Server and give both its
// Options).
//
// The binary is found on PATH or at $BERTH_VERSITYGW. Without it the test
// is skipped, unless BERTH_INTEROP=required, as in CI, where it fails.
// Install it with
//
//	go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Server is a running versitygw.
type Server struct {
	// Endpoint is the server's URL, http://127.0.0.1:<port>.
	Endpoint string
	// AccessKey and SecretKey are the root user's, generated for this
	// server.
	AccessKey, SecretKey string
	// Region is the one the server answers for.
	Region string
	// Dir is the directory the server keeps buckets in, one
	// subdirectory each.
	Dir string

	cmd      *exec.Cmd
	waited   chan error
	stopOnce sync.Once
	client   *minio.Client
	log      *lockedBuffer
}

// Binary returns the path of the versitygw binary: $BERTH_VERSITYGW if
// set, else versitygw on PATH; "" if there is none.
func Binary() string {
	if p := os.Getenv("BERTH_VERSITYGW"); p != "" {
		return p
	}
	p, err := exec.LookPath("versitygw")
	if err != nil {
		return ""
	}
	return p
}

// Start starts a server over a directory of t.TempDir() and stops it when
// the test ends. It skips t when the binary is missing, unless
// BERTH_INTEROP=required.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Binary()
	if bin == "" {
		msg := "versitygw not installed (go install github.com/versity/versitygw/cmd/versitygw@v1.8.0, or set BERTH_VERSITYGW): skipping the S3 tests"
		if os.Getenv("BERTH_INTEROP") == "required" {
			t.Fatal(msg + " (BERTH_INTEROP=required)")
		}
		t.Skip(msg)
	}
	dir := t.TempDir()
	s := &Server{
		AccessKey: "berth" + token(6), SecretKey: token(20), Region: "us-east-1",
		Dir: filepath.Join(dir, "buckets"),
	}
	if err := os.Mkdir(s.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	var err error
	// The port is picked free and handed over, which another process
	// may take in between: try again on a new one.
	for range 3 {
		if err = s.start(bin, dir); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("starting versitygw: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) start(bin, dir string) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := l.Addr().String()
	l.Close()
	s.Endpoint = "http://" + addr
	s.log = &lockedBuffer{}
	s.cmd = exec.Command(bin,
		"--port", addr, "--region", s.Region, "--health", "/health",
		// Without it versitygw closes the connection after every
		// answer, and each request pays for a new one: about half the
		// client's and server's CPU per chunk (docs/operations.md).
		"--keep-alive",
		"--iam-dir", filepath.Join(dir, "iam"),
		"posix", "--data-integrity-etag", s.Dir)
	// Credentials through the environment, not argv, which ps shows.
	s.cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+s.AccessKey, "ROOT_SECRET_ACCESS_KEY="+s.SecretKey)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := os.MkdirAll(filepath.Join(dir, "iam"), 0o700); err != nil {
		return err
	}
	if err := s.cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("versitygw exited (%v): %s", err, s.log.String())
		case <-time.After(50 * time.Millisecond):
		}
		if r, err := http.Get(s.Endpoint + "/health"); err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			s.cmd.Process.Kill()
			<-exited
			return fmt.Errorf("versitygw not ready at %s after 30s: %s", addr, s.log.String())
		}
	}
	s.waited = exited
	c, err := minio.New(addr, &minio.Options{Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""), Region: s.Region, BucketLookup: minio.BucketLookupPath})
	if err != nil {
		return err
	}
	s.client = c
	return nil
}

// Bucket creates a new empty bucket with a random name and returns the
// name. Each test that wants a store of its own takes a bucket of its own
// on the one server.
func (s *Server) Bucket(t testing.TB) string {
	t.Helper()
	name := "berth-" + strings.ToLower(token(6))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.client.MakeBucket(ctx, name, minio.MakeBucketOptions{Region: s.Region}); err != nil {
		t.Fatalf("creating bucket %s: %v", name, err)
	}
	return name
}

// Env returns the environment that points a berth process (berth serve,
// fsck, gc, ...) at bucket on this server: storage.backend s3, the
// storage.s3 keys, and the credentials where berth reads them. Append it
// to os.Environ() for an exec.Cmd, or t.Setenv each "KEY=value".
func (s *Server) Env(bucket string) []string {
	return []string{
		// config.EnvName of each key; daemon's TestS3Backend runs fsck
		// with them, so a renamed key fails there.
		"BERTH_STORAGE_BACKEND=s3",
		"BERTH_STORAGE_S3_ENDPOINT=" + s.Endpoint,
		"BERTH_STORAGE_S3_BUCKET=" + bucket,
		"BERTH_STORAGE_S3_REGION=" + s.Region,
		"BERTH_STORAGE_S3_PATH_STYLE=true",
		"AWS_ACCESS_KEY_ID=" + s.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + s.SecretKey,
	}
}

// CPU returns the processor time (user and system) the server has used
// so far, from /proc, so a benchmark can give the S3 server's own cost
// beside berth's; 0 where /proc cannot tell.
func (s *Server) CPU() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses and
	// may hold spaces: state is field 3, utime 14, stime 15.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	// USER_HZ is 100 on every Linux berth runs on.
	return time.Duration(utime+stime) * (time.Second / 100)
}

// Log returns what the server has written so far, for a failing test to
// show.
func (s *Server) Log() string { return s.log.String() }

// Stop ends the server and waits for it; Start arranges it at cleanup,
// and a test that wants the server gone earlier (to see what a store does
// without it) calls it. It is idempotent.
func (s *Server) Stop() { s.stopOnce.Do(s.stop) }

func (s *Server) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.waited:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.waited
	}
}

func token(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// lockedBuffer collects the server's output, which its goroutines write
// while a test may read it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 {
		return len(p), nil // enough to show what went wrong
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
