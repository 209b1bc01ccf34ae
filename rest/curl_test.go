package rest

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"berth/berthtest"
)

// TestCurlUploadDownload moves a file through the API with curl, the
// client the spec's examples use, checking TLS against the test server's
// certificate rather than skipping verification.
func TestCurlUploadDownload(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed; skipping the curl upload and download (install curl to run it)")
	}
	f := newFixture(t)
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	data := berthtest.RandomBytes(9, 5<<20+123)
	name := "ünï côdé file.bin"
	src := filepath.Join(dir, name)
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) []byte {
		t.Helper()
		base := []string{"--silent", "--show-error", "--fail-with-body", "--cacert", ca, "-H", "Authorization: Bearer " + f.token}
		out, err := exec.Command(curl, append(base, args...)...).Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("curl %v: %v: %s %s", args, err, out, stderr)
		}
		return out
	}
	out := run("-F", "file=@"+src, f.url(f.at("/api/2/files/%d/upload")))
	var fj fileJSON
	if err := json.Unmarshal(out, &fj); err != nil || fj.Size != int64(len(data)) || fj.Path != "/"+name {
		t.Fatalf("curl upload: %s %v", out, err)
	}
	dst := filepath.Join(dir, "out")
	run("-o", dst, f.url(f.at("/api/2/files/%d/%d/download", fj.ID)))
	got, err := os.ReadFile(dst)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("curl download: %d bytes, want %d, %v", len(got), len(data), err)
	}
	// curl's --remote-header-name uses the Content-Disposition name.
	hdir := filepath.Join(dir, "h")
	os.Mkdir(hdir, 0o700)
	cmd := exec.Command(curl, "--silent", "--fail", "--cacert", ca, "-H", "Authorization: Bearer "+f.token, "-O", "-J", f.url(f.at("/api/2/files/%d/%d/download", fj.ID)))
	cmd.Dir = hdir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("curl -OJ: %v %s", err, out)
	}
	entries, _ := os.ReadDir(hdir)
	if len(entries) != 1 {
		t.Fatalf("curl -OJ wrote %v", entries)
	}
	t.Logf("curl -OJ saved %q", entries[0].Name())
}
