package daemon

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth/config"
	"berth/vfs"
)

// TestFsckNamesTheChunks: fsck lists each chunk it found wrong, not only
// how many, so the operator can restore that chunk file from a backup.
func TestFsckNamesTheChunks(t *testing.T) {
	ctx := t.Context()
	cfg := config.Default()
	cfg.Data = t.TempDir()
	log := slog.New(slog.DiscardHandler)
	st, err := openStores(ctx, cfg, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	root, err := st.files.CreateRoot(ctx, "r", vfs.RootSync)
	if err == nil {
		// Over vfs.InlineMax, so the contents go to the chunk store.
		_, err = st.files.WriteFile(ctx, root.ID, root.FolderID, "f.bin", bytes.NewReader(content(1, 100<<10)), vfs.WriteOptions{})
	}
	st.close(log)
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := filepath.Glob(filepath.Join(cfg.Data, "chunks", "*", "*"))
	if err != nil || len(chunks) == 0 {
		t.Fatalf("no chunk files: %v", err)
	}
	if err := os.Remove(chunks[0]); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	err = run(ctx, []string{"fsck", "--data", cfg.Data}, &stdout, &stderr)
	if !errors.Is(err, errFsckProblems) {
		t.Fatalf("fsck of a store missing a chunk: %v", err)
	}
	if want := "missing " + filepath.Base(chunks[0]); !strings.Contains(stdout.String(), want) {
		t.Errorf("fsck printed %q, want a line %q", stdout.String(), want)
	}
}
