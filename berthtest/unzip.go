package berthtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// UnzipTest runs the unzip tool's test of every entry of the archive b
// (CRCs, sizes, local headers against the central directory): a reader
// other than Go's own archive/zip. Without the tool the check is skipped,
// unless BERTH_INTEROP=required (CI installs it).
func UnzipTest(t testing.TB, b []byte) {
	t.Helper()
	bin, err := exec.LookPath("unzip")
	if err != nil {
		if os.Getenv("BERTH_INTEROP") == "required" {
			t.Fatal("unzip not found and BERTH_INTEROP=required")
		}
		t.Log("unzip not found: its check is skipped")
		return
	}
	p := filepath.Join(t.TempDir(), "a.zip")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "-t", p).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "No errors detected") {
		t.Fatalf("unzip -t: %v\n%s", err, out)
	}
}
