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
//
// Format 2 counts dead properties' bytes in the usage ledgers (a field
// format 1 does not know, which a berth of format 1 drops from every
// ledger shard it rewrites, leaving the ledger short or negative) and in
// the items' vfspropsize records (which it does not keep up as it sets
// or removes properties). Format 1 reads as format 2 unchanged: the
// properties stored before count from their item's next PROPPATCH.
//
// Format 3 keeps a deleted root's usage in its tallies until its purge
// (vfs rootRec.TrashCounted). A berth of format 2 purging such a root
// leaves its bytes in the tallies for good, and one that changes its
// usage (a staged upload's reservation given back) misses them: tallies
// short or long that nothing repairs. Format 2 reads as format 3
// unchanged: roots deleted before left their tallies then, and their
// purge takes nothing out.
const dataFormat = 3

// formatFile names the marker in the data directory. It is a plain file,
// not a key in meta/, so that it can be read before Badger opens the
// store: a newer berth may also have moved to a newer Badger.
const formatFile = "format"

// errNewerFormat is a data directory written by a newer berth.
var errNewerFormat = errors.New("data directory written by a newer berth")

// checkFormat reads the data directory's format marker, refusing formats
// this berth does not know, and writes this berth's format where the
// marker is missing or older. Every directory without one is format 1: a
// new one, or one from a berth before the marker existed, which wrote
// format 1 without saying so. Formats 1 and 2 need no conversion (see
// dataFormat), only the marker, written before anything is opened so
// that a berth of an older format refuses the directory from then on.
func checkFormat(dir string) error {
	name := filepath.Join(dir, formatFile)
	mark := func() error {
		if err := atomicfile.WriteFile(name, []byte(strconv.Itoa(dataFormat)+"\n"), 0o600); err != nil {
			return fmt.Errorf("writing the data format marker: %w", err)
		}
		return nil
	}
	b, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return mark()
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
	if n < dataFormat {
		return mark()
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
