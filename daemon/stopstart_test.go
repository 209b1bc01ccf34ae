package daemon

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestStopDuringStart: SIGTERM while berth is still starting (opening its
// stores, creating the first administrator) is a stop like any other: the
// process exits 0, as systemd expects of a service it stops, and the next
// start works.
func TestStopDuringStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	bin := buildBinary(t)
	for _, m := range []struct {
		name string
		file string // SIGTERM once it exists in the data directory
	}{
		{"stores opening", "meta"},
		{"first run", initialPasswordFile},
	} {
		t.Run(m.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			cmd := exec.Command(bin, "serve", "--data", data, "--listen", "127.0.0.1:0", "--metrics-listen", "")
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
			var out lockedBuffer
			cmd.Stderr = &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				if _, err := os.Stat(filepath.Join(data, m.file)); err == nil {
					break
				}
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					t.Fatalf("%s never appeared:\n%s", m.file, out.String())
				}
				time.Sleep(200 * time.Microsecond)
			}
			cmd.Process.Signal(syscall.SIGTERM)
			if err := cmd.Wait(); err != nil {
				t.Errorf("SIGTERM during the start: %v\n%s", err, out.String())
			}
			p := startDaemon(t, bin, data)
			newLCClient(t, p, data)
			p.stop(t)
			fsck(t, bin, data)
		})
	}
}
