package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth/config"
	"berth/vfs"

	"berth/berthtest"
)

// TestDataFormatMarker: a new data directory gets the marker; one from
// before the marker (the same layout, no marker) opens with its files and
// gets it; a newer format or a garbled marker is refused before the
// metadata store is opened, so nothing in it is touched.
func TestDataFormatMarker(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	cfg := config.Default()
	cfg.Data = t.TempDir()
	marker := filepath.Join(cfg.Data, formatFile)

	st, err := openStores(ctx, cfg, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	root, err := st.files.CreateRoot(ctx, "alice", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.files.WriteFile(ctx, root.ID, root.FolderID, "kept.txt", strings.NewReader("kept"), vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	st.close(log)
	if b, err := os.ReadFile(marker); err != nil || string(b) != "3\n" {
		t.Fatalf("marker of a new directory: %q, %v; want \"3\\n\"", b, err)
	}

	// A directory written before the marker existed, one a release of
	// format 1 (4a23093) wrote, and one of format 2 (94816b4): each
	// opens with its files and is marked format 3, so that those
	// releases refuse it after (format 1 would rewrite usage ledgers
	// without their dead-property bytes; format 2 would purge a deleted
	// root without taking its usage out of its tallies).
	for _, old := range []struct {
		name   string
		marker []byte // nil: none
	}{
		{"no marker", nil},
		{"format 1", []byte("1\n")},
		{"format 2", []byte("2\n")},
	} {
		if err := os.Remove(marker); err != nil {
			t.Fatal(err)
		}
		if old.marker != nil {
			if err := os.WriteFile(marker, old.marker, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		st, err = openStores(ctx, cfg, log, nil)
		if err != nil {
			t.Fatalf("%s: opening: %v", old.name, err)
		}
		f, err := st.files.Lookup(ctx, root.ID, "/kept.txt")
		st.close(log)
		if err != nil || f.Size != 4 {
			t.Fatalf("%s: kept.txt after reopening: %+v, %v", old.name, f, err)
		}
		if b, err := os.ReadFile(marker); err != nil || string(b) != "3\n" {
			t.Fatalf("%s: marker after reopening: %q, %v; want \"3\\n\"", old.name, b, err)
		}
	}

	manifest := filepath.Join(cfg.Data, "meta", "MANIFEST")
	before, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		marker, want string
		newer        bool
	}{
		{"4\n", "format 4", true},
		{"999", "format 999", true},
		{"banana\n", `"banana\n"`, false},
		{"0\n", `"0\n"`, false},
		{"", `""`, false},
	} {
		if err := os.WriteFile(marker, []byte(tc.marker), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := openStores(ctx, cfg, log, nil)
		if err == nil {
			t.Fatalf("marker %q: opened, want a refusal", tc.marker)
		}
		if !strings.Contains(err.Error(), tc.want) || errors.Is(err, errNewerFormat) != tc.newer {
			t.Errorf("marker %q: %v, want an error naming %s (newer: %v)", tc.marker, err, tc.want, tc.newer)
		}
		if b, _ := os.ReadFile(marker); string(b) != tc.marker {
			t.Errorf("marker %q rewritten to %q", tc.marker, b)
		}
	}
	if after, err := os.ReadFile(manifest); err != nil || string(after) != string(before) {
		t.Errorf("the metadata store changed while its format was refused (%v)", err)
	}
}

// TestServeRefusesNewerFormat: the real binary, pointed at a directory a
// newer berth wrote, exits non-zero at once and says why.
func TestServeRefusesNewerFormat(t *testing.T) {
	bin := berthtest.BuildBerth(t)
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, formatFile), []byte("7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--data", data, "--listen", "127.0.0.1:0", "--metrics-listen", "")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	cmd.Stdin = nil
	cmd.Stdout = io.Discard
	out := &lockedBuffer{}
	cmd.Stderr = out
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("serve on a format 7 directory: %v, want a non-zero exit\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "format 7") || !strings.Contains(out.String(), "newer berth") {
		t.Errorf("stderr does not say why:\n%s", out.String())
	}
	if _, err := os.Stat(filepath.Join(data, "meta")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("meta/ was created (%v)", err)
	}
}
