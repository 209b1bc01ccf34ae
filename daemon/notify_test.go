package daemon

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSystemdNotify: under systemd (NOTIFY_SOCKET, WATCHDOG_USEC) the real
// binary sends READY=1 once its listener accepts, WATCHDOG=1 pings at half
// the watchdog interval, and STOPPING=1 at SIGTERM before it exits 0.
func TestSystemdNotify(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	bin := buildBinary(t)
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
