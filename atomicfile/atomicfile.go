// Package atomicfile replaces small files whole and durably: the daemon's
// certificate, key and first-run files, and the agent's state and indexes.
package atomicfile

import (
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"
)

// WriteFile replaces name with data, so that a crash at any moment leaves
// either the old content or the new, never a mix, and once it returns the
// new content survives power loss. renameio gives the atomic part (a
// temporary file beside name, fsynced, then renamed over it) but by design
// not the durable one: the rename lives in the folder, which is synced
// here. perm is applied as given, whatever the umask.
func WriteFile(name string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(name)
	// A temporary file in TMPDIR would not be synced with the folder, and
	// may not be on the same file system: keep it beside name. Static
	// permissions, unlike renameio.WriteFile's, do not copy a replaced
	// file's mode: a key written 0600 stays 0600.
	t, err := renameio.NewPendingFile(name, renameio.WithTempDir(dir), renameio.WithStaticPermissions(perm))
	if err != nil {
		return err
	}
	defer t.Cleanup()
	if _, err := t.Write(data); err != nil {
		return err
	}
	if err := t.CloseAtomicallyReplace(); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
