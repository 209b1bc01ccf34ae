package webdav_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"berth/vfs"
)

// errRefused marks a mount the environment does not permit (no root, no
// FUSE device, a container without the mount capability), as opposed to a
// mount that fails because of berth or a client bug.
var errRefused = errors.New("mounting refused by the environment")

// refusalHints are the messages with which mount.davfs, rclone and
// fusermount report a mount that the environment does not permit.
var refusalHints = []string{
	"permission denied", "operation not permitted", "not permitted",
	"fuse device", "/dev/fuse", "no such device", "must be root",
	"only root", "can't open fuse", "fuse: device not found",
}

// classify turns a failed mount command into errRefused when its output
// says the environment refused the mount, and into a plain error otherwise.
func classify(what string, err error, out []byte) error {
	low := strings.ToLower(string(out))
	for _, h := range refusalHints {
		if strings.Contains(low, h) {
			return fmt.Errorf("%w: %s: %v: %s", errRefused, what, err, strings.TrimSpace(string(out)))
		}
	}
	return fmt.Errorf("%s: %v: %s", what, err, strings.TrimSpace(string(out)))
}

// isMounted reports whether dir is a mount point, from /proc/self/mountinfo.
func isMounted(dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

// run runs a command with a deadline and returns its combined output.
func run(ctx context.Context, timeout time.Duration, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return exec.CommandContext(ctx, name, args...).CombinedOutput()
}

// mountDavfs mounts the fixture's /webdav/alice/ on a fresh directory with
// davfs2 over TLS, trusting exactly the test server's certificate, and
// unmounts it at cleanup. It returns the mount point and an unmount
// function that flushes davfs2's cache to the server (safe to call twice).
func mountDavfs(t *testing.T, f *fixture) (string, func() error, error) {
	t.Helper()
	if os.Geteuid() != 0 {
		return "", nil, fmt.Errorf("%w: mount -t davfs needs root (uid %d)", errRefused, os.Geteuid())
	}
	// mount.davfs drops to the davfs2 user, which must reach its cache:
	// t.TempDir's parents are 0700, so the cache lives in its own 0755 tree.
	base, err := os.MkdirTemp("", "berth-davfs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	mnt, cache := filepath.Join(base, "mnt"), filepath.Join(base, "cache")
	for _, d := range []string{mnt, cache} {
		if err := os.Mkdir(d, 0o777); err != nil {
			t.Fatal(err)
		}
		os.Chmod(d, 0o777)
	}
	cert := filepath.Join(base, "server.pem")
	pemCert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.srv.Certificate().Raw})
	if err := os.WriteFile(cert, pemCert, 0o644); err != nil {
		t.Fatal(err)
	}
	secrets := filepath.Join(base, "secrets")
	// The password has spaces: quoted, as davfs2.conf(5) allows.
	if err := os.WriteFile(secrets, fmt.Appendf(nil, "%s alice %q\n", mnt, password), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(base, "davfs2.conf")
	confText := strings.Join([]string{
		"trust_server_cert " + cert,
		"secrets " + secrets,
		"cache_dir " + cache,
		"ask_auth 0",
		"use_locks 1",
		"delay_upload 0",
		"gui_optimize 0",
		// The kernel asks FUSE for 32 KiB directory reads; with the
		// default 16 KiB buffer davfs2 1.6 answers EINVAL to every ls.
		"buf_size 64",
	}, "\n") + "\n"
	if err := os.WriteFile(conf, []byte(confText), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	out, err := run(ctx, 20*time.Second, "mount", "-t", "davfs", "-o", "conf="+conf, f.url("/"), mnt)
	if err != nil {
		return "", nil, classify("mount -t davfs", err, out)
	}
	mounted := true
	unmount := func() error {
		if !mounted {
			return nil
		}
		// umount.davfs waits until mount.davfs has uploaded every
		// changed file and exited.
		out, err := run(ctx, 30*time.Second, "umount", mnt)
		if err != nil && isMounted(mnt) {
			return fmt.Errorf("umount %s: %v: %s", mnt, err, out)
		}
		mounted = false
		return nil
	}
	t.Cleanup(func() {
		if err := unmount(); err != nil {
			t.Error(err)
			run(ctx, 10*time.Second, "umount", "-l", mnt)
		}
	})
	return mnt, unmount, nil
}

// mountRclone mounts the fixture's /webdav/alice/ with rclone mount over
// FUSE, without a local cache, so that close waits for the upload.
func mountRclone(t *testing.T, f *fixture, bin, fusermount string) (string, func() error, error) {
	t.Helper()
	return mountRcloneRemote(t, bin, fusermount, rcloneRemote(t, bin, f))
}

// mountRcloneRemote is mountRclone of an rclone remote.
func mountRcloneRemote(t *testing.T, bin, fusermount, remote string) (string, func() error, error) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return "", nil, fmt.Errorf("%w: rclone mount needs /dev/fuse: %v", errRefused, err)
	}
	mnt := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var logs bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "mount", "--no-check-certificate", "--config", "/dev/null",
		"--vfs-cache-mode", "off", "--dir-cache-time", "0s", "--poll-interval", "0",
		remote, mnt)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		cancel()
		return "", nil, fmt.Errorf("rclone mount: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(15 * time.Second)
	for !isMounted(mnt) {
		select {
		case err := <-exited:
			cancel()
			return "", nil, classify("rclone mount", err, logs.Bytes())
		case <-deadline:
			cancel()
			<-exited
			return "", nil, fmt.Errorf("rclone mount: not mounted after 15 s: %s", logs.Bytes())
		case <-time.After(50 * time.Millisecond):
		}
	}
	done := false
	unmount := func() error {
		if done {
			return nil
		}
		done = true
		defer cancel()
		if out, err := run(context.Background(), 20*time.Second, fusermount, "-u", mnt); err != nil {
			return fmt.Errorf("%s -u %s: %v: %s", fusermount, mnt, err, out)
		}
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			return errors.New("rclone mount did not exit after unmount")
		}
		return nil
	}
	t.Cleanup(func() {
		if err := unmount(); err != nil {
			t.Error(err)
			run(context.Background(), 10*time.Second, fusermount, "-uz", mnt)
		}
	})
	return mnt, unmount, nil
}

// TestMount mounts a real berth over TLS as a file system, with davfs2
// where the environment permits mounting it and rclone mount otherwise, and
// drives it with cp, ls, mv and rm; vfs must then hold exactly what was
// copied, byte for byte. A missing tool fails under BERTH_INTEROP=required;
// an environment that refuses to mount (no root, no FUSE device) skips the
// test even then, because no install fixes it.
func TestMount(t *testing.T) {
	needTool(t, "mount.davfs")
	f := newFixture(t)
	mnt, unmount, err := mountDavfs(t, f)
	client := "davfs2"
	if errors.Is(err, errRefused) {
		t.Logf("davfs2: %v; trying rclone mount", err)
		rclone := needTool(t, "rclone")
		fusermount, ferr := exec.LookPath("fusermount3")
		if ferr != nil {
			fusermount = needTool(t, "fusermount")
		}
		var rerr error
		mnt, unmount, rerr = mountRclone(t, f, rclone, fusermount)
		if errors.Is(rerr, errRefused) {
			t.Skipf("mounting is refused here, by davfs2 (%v) and by rclone mount (%v); BERTH_INTEROP=required does not change that", err, rerr)
		}
		err, client = rerr, "rclone mount"
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("mounted %s with %s", f.url("/"), client)

	// Files on the local disk, copied in with the real cp.
	local := t.TempDir()
	files := map[string][]byte{
		"small.txt":        []byte("hello from " + client + "\n"),
		"big.bin":          make([]byte, 3<<20+123),
		"héllo wörld.txt":  []byte("non-ASCII and spaces\n"),
		"to be removed.md": []byte("# soon gone\n"),
	}
	rand.Read(files["big.bin"])
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(local, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	sh := func(name string, args ...string) string {
		t.Helper()
		out, err := run(ctx, 30*time.Second, name, args...)
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	docs := filepath.Join(mnt, "docs")
	sh("mkdir", docs)
	for name := range files {
		sh("cp", filepath.Join(local, name), docs+"/")
	}
	got := strings.Split(strings.TrimRight(sh("ls", "-1", docs), "\n"), "\n")
	slices.Sort(got)
	wantNames := []string{"big.bin", "héllo wörld.txt", "small.txt", "to be removed.md"}
	if !slices.Equal(got, wantNames) {
		t.Fatalf("ls %s: %q, want %q", docs, got, wantNames)
	}
	sh("mv", filepath.Join(docs, "big.bin"), filepath.Join(docs, "moved.bin"))
	sh("rm", filepath.Join(docs, "to be removed.md"))
	sh("cmp", filepath.Join(local, "big.bin"), filepath.Join(docs, "moved.bin"))

	// Unmounting flushes what the client still holds; then vfs is the truth.
	if err := unmount(); err != nil {
		t.Fatal(err)
	}
	for name, wantData := range map[string][]byte{
		"/docs/small.txt":       files["small.txt"],
		"/docs/héllo wörld.txt": files["héllo wörld.txt"],
		"/docs/moved.bin":       files["big.bin"],
	} {
		b, err := f.read(name)
		if err != nil {
			t.Fatalf("vfs %s: %v", name, err)
		}
		if !bytes.Equal(b, wantData) {
			t.Fatalf("vfs %s: %d bytes differ from the %d copied in", name, len(b), len(wantData))
		}
	}
	for _, gone := range []string{"/docs/big.bin", "/docs/to be removed.md"} {
		if _, err := f.lookup(gone); !errors.Is(err, vfs.ErrNotExist) {
			t.Fatalf("vfs %s after mv/rm: %v, want ErrNotExist", gone, err)
		}
	}
}
