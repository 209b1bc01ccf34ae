package kv

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestOpenInUse: a second open of a database another holder has open is
// ErrInUse, so the daemon can say the data directory is taken; any other
// failure (here a directory that is a file) is not.
func TestOpenInUse(t *testing.T) {
	dir := t.TempDir()
	b := openDisk(t, dir, BadgerOptions{})
	_, err := OpenBadger(BadgerOptions{Dir: dir, Logger: testLogger(t)})
	if !errors.Is(err, ErrInUse) {
		t.Errorf("second open: %v, want ErrInUse", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// Closed: free again.
	openDisk(t, dir, BadgerOptions{}).Close()

	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = OpenBadger(BadgerOptions{Dir: file, Logger: testLogger(t)})
	if err == nil || errors.Is(err, ErrInUse) {
		t.Errorf("open of a file: %v, want an error other than ErrInUse", err)
	}
}
