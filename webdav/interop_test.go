package webdav_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"berth/vfs"
)

// needTool returns the path of an interop client, skipping the test when
// it is missing, unless BERTH_INTEROP=required (as in CI) makes that a failure.
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("BERTH_INTEROP") == "required" {
			t.Fatalf("%s is not installed and BERTH_INTEROP=required (apt-get install %s)", name, name)
		}
		t.Skipf("%s is not installed; skipping (apt-get install %s, or set BERTH_INTEROP=required to fail instead)", name, name)
	}
	return p
}

// TestLitmus runs litmus's five suites against a real berth over HTTPS
// (neon accepts the test server's certificate), then the http suite again
// over plain HTTP, because litmus skips its Expect: 100-continue test on
// TLS servers. Failures and warnings both fail the test: docs/webdav.md
// promises none.
func TestLitmus(t *testing.T) {
	bin := needTool(t, "litmus")
	run := func(f *fixture, suites string) {
		t.Helper()
		cmd := exec.Command(bin, "-k", f.url("/"), "alice", password)
		cmd.Env = append(os.Environ(), "TESTS="+suites)
		out, err := cmd.CombinedOutput()
		t.Logf("litmus %s (%s):\n%s", suites, f.srv.URL, out)
		if err != nil {
			t.Fatalf("litmus: %v", err)
		}
		if strings.Contains(string(out), "FAIL") || strings.Contains(string(out), "WARNING") {
			t.Fatal("litmus reported failures or warnings")
		}
	}
	run(newFixture(t), "basic copymove props locks http")
	run(newFixtureWith(t, fixtureOptions{PlainHTTP: true}), "http")
}

// rcloneRemote is an on-the-fly rclone WebDAV remote for the fixture.
func rcloneRemote(t *testing.T, bin string, f *fixture) string {
	t.Helper()
	return rcloneRemoteAs(t, bin, f, "alice", password)
}

// rcloneRemoteAs is rcloneRemote with other credentials.
func rcloneRemoteAs(t *testing.T, bin string, f *fixture, user, pass string) string {
	t.Helper()
	out, err := exec.Command(bin, "obscure", pass).Output()
	if err != nil {
		t.Fatalf("rclone obscure: %v", err)
	}
	return fmt.Sprintf(":webdav,url='%s',vendor=other,user=%s,pass='%s':", f.url("/"), user, strings.TrimSpace(string(out)))
}

// TestRclone copies a tree of 200 small files and one large file up with
// rclone, checks it byte by byte both ways, moves it server-side and
// deletes it. The large file is 256 MiB unless BERTH_INTEROP_LARGE_MIB
// says otherwise (CI may set 1024).
func TestRclone(t *testing.T) {
	bin := needTool(t, "rclone")
	f := newFixture(t)
	remote := rcloneRemote(t, bin, f)
	local := t.TempDir()
	for i := range 200 {
		dir := filepath.Join(local, fmt.Sprintf("d%02d", i%10), "sub dir")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		data := make([]byte, 100+i*37)
		rand.Read(data)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d é.bin", i)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	large := int64(256)
	if v, err := strconv.ParseInt(os.Getenv("BERTH_INTEROP_LARGE_MIB"), 10, 64); err == nil && v > 0 {
		large = v
	}
	lf, err := os.Create(filepath.Join(local, "large.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(lf, rand.Reader, large<<20); err != nil {
		t.Fatal(err)
	}
	lf.Close()

	rc := func(args ...string) {
		t.Helper()
		base := []string{"--no-check-certificate", "--config", "/dev/null", "--retries", "1", "--low-level-retries", "1"}
		out, err := exec.Command(bin, append(base, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("rclone %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	rc("copy", local, remote+"tree")
	rc("check", "--download", local, remote+"tree")
	rc("check", "--download", remote+"tree", local)
	rc("moveto", remote+"tree", remote+"moved")
	rc("check", "--download", local, remote+"moved")
	if _, err := f.lookup("/tree"); !errors.Is(err, vfs.ErrNotExist) {
		t.Fatalf("after move, /tree: %v", err)
	}
	got, err := f.read("/moved/d03/sub dir/f003 é.bin")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(filepath.Join(local, "d03", "sub dir", "f003 é.bin"))
	if !bytes.Equal(got, want) {
		t.Fatal("a file copied by rclone reads back different through vfs")
	}
	rc("purge", remote+"moved")
	if _, err := f.lookup("/moved"); !errors.Is(err, vfs.ErrNotExist) {
		t.Fatalf("after purge, /moved: %v", err)
	}
}

// TestCadaver drives cadaver through a script on stdin: put, get, mkcol,
// move, lock, unlock, propset, propget, delete. cadaver rejects an
// untrusted certificate outright when stdin is not a terminal, so this test
// serves plain HTTP; and .netrc cannot hold a password with spaces, so
// alice gets one without.
func TestCadaver(t *testing.T) {
	bin := needTool(t, "cadaver")
	f := newFixtureWith(t, fixtureOptions{PlainHTTP: true})
	const pw = "cadaver-password-1"
	if err := f.accounts.SetPassword(context.Background(), f.person.ID, pw); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	u, _ := url.Parse(f.srv.URL)
	netrc := fmt.Sprintf("machine %s login alice password %s\n", u.Hostname(), pw)
	if err := os.WriteFile(filepath.Join(home, ".netrc"), []byte(netrc), 0o600); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(home, "hello.txt")
	if err := os.WriteFile(src, []byte("hello from cadaver\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := strings.Join([]string{
		"mkcol docs",
		"put " + src + " docs/hello.txt",
		"get docs/hello.txt " + filepath.Join(home, "back.txt"),
		"move docs/hello.txt docs/moved.txt",
		"lock docs/moved.txt",
		"unlock docs/moved.txt",
		"propset docs/moved.txt color blue",
		"propget docs/moved.txt color",
		"delete docs/moved.txt",
		"quit",
	}, "\n") + "\n"
	cmd := exec.Command(bin, f.url("/"))
	cmd.Env = append(os.Environ(), "HOME="+home)
	cmd.Stdin = strings.NewReader(script)
	out, err := cmd.CombinedOutput()
	t.Logf("cadaver:\n%s", out)
	if err != nil {
		t.Fatalf("cadaver: %v", err)
	}
	if c := strings.Count(string(out), "succeeded"); c < 7 || strings.Contains(string(out), "failed") {
		t.Fatalf("cadaver: %d operations succeeded, or one failed", c)
	}
	contains(t, string(out), "blue")
	if b, err := os.ReadFile(filepath.Join(home, "back.txt")); err != nil || string(b) != "hello from cadaver\n" {
		t.Fatalf("cadaver get: %q, %v", b, err)
	}
	if _, err := f.lookup("/docs/moved.txt"); !errors.Is(err, vfs.ErrNotExist) {
		t.Fatalf("after delete: %v", err)
	}
}
