package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"berth/atomicfile"
)

// dataFormat is the layout of a data directory this berth reads and
// writes: the key layout and record encodings in meta/ and the chunk files
// in chunks/. A change that an older berth would misread raises it, and
// comes with the step that upgrades a directory of the format before, so
// that an upgrade never meets data it half understands and a downgrade is
// refused before anything is opened, instead of rewriting records the
// newer berth wrote.
const dataFormat = 1

// formatFile names the marker in the data directory. It is a plain file,
// not a key in meta/, so that it can be read before Badger opens the
// store: a newer berth may also have moved to a newer Badger.
const formatFile = "format"

// errNewerFormat is a data directory written by a newer berth.
var errNewerFormat = errors.New("data directory written by a newer berth")

// checkFormat reads the data directory's format marker, refusing formats
// this berth does not know, and writes the marker where it is missing.
// Every directory without one is format 1: a new one, or one from a
// berth before the marker existed, which wrote format 1 without saying so.
// (When format 2 comes, a missing marker still means 1 if meta/ holds
// data.)
func checkFormat(dir string) error {
	name := filepath.Join(dir, formatFile)
	b, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		if err := atomicfile.WriteFile(name, []byte(strconv.Itoa(dataFormat)+"\n"), 0o600); err != nil {
			return fmt.Errorf("writing the data format marker: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the data format marker: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 1 {
		return fmt.Errorf("%s holds %q, not a data format number (this berth writes %d): restore it or the data directory from a backup", name, truncate(string(b), 40), dataFormat)
	}
	if n > dataFormat {
		return fmt.Errorf("%w: %s is format %d and this berth (%s) reads format %d; run the newer berth, or restore a backup this one made",
			errNewerFormat, dir, n, buildVersion(), dataFormat)
	}
	return nil
}

// truncate shortens s to at most n bytes for an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
