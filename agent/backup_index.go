package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// indexEntry is what a backup's index knows of one item of the backed-up
// folder: what the server holds for it (its node, and for a file the
// current revision and that revision's chunks) and the local state it was
// sent from (size, modification time, inode), which tells a later run
// that a file did not change without reading it.
type indexEntry struct {
	Path    string      `json:"p"`
	Dir     bool        `json:"d,omitempty"`
	ID      uint64      `json:"id,omitempty"`
	Rev     uint64      `json:"rev,omitempty"`
	Size    int64       `json:"size,omitempty"`
	MtimeNs int64       `json:"mt,omitempty"`
	Ino     uint64      `json:"ino,omitempty"`
	Chunks  []chunkInfo `json:"c,omitempty"`
	// Del, in the journal, records that the path is gone from the
	// server.
	Del bool `json:"del,omitempty"`
	// Run, in the journal, marks a run's begin or end.
	Run string `json:"run,omitempty"`
}

// chunkInfo is one content-defined chunk of a revision: its length and a
// hash of its bytes (SHA-256, the first 16 bytes). Offsets follow from
// the lengths.
type chunkInfo struct {
	Len int64  `json:"n"`
	Sum []byte `json:"h"`
}

// backupIndex is a backup's local index, kept in the agent's state folder
// as two files of JSON lines: index.jsonl, a snapshot written whole
// (temporary file, fsync, rename), and journal.jsonl, to which each
// change is appended with one write as soon as the server acknowledged
// it. A killed agent loses nothing it was told is stored (the kernel has
// the write), and a torn last line (a crash of the machine) is ignored:
// that file is sent again. Replaying the journal over the snapshot is
// idempotent, so a crash between compacting and truncating is harmless.
type backupIndex struct {
	dir     string
	mu      sync.Mutex
	entries map[string]*indexEntry
	journal *os.File
	jn      int
	// dirty: the last run began and did not end.
	dirty bool
}

const (
	indexSnapshot = "index.jsonl"
	indexJournal  = "journal.jsonl"
)

// openIndex reads the index kept in dir, making dir when missing.
func openIndex(dir string) (*backupIndex, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("agent: backup index: %w", err)
	}
	ix := &backupIndex{dir: dir, entries: make(map[string]*indexEntry)}
	if _, _, err := ix.replay(filepath.Join(dir, indexSnapshot)); err != nil {
		return nil, err
	}
	n, good, err := ix.replay(filepath.Join(dir, indexJournal))
	if err != nil {
		return nil, err
	}
	ix.jn = n
	f, err := os.OpenFile(filepath.Join(dir, indexJournal), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("agent: backup index: %w", err)
	}
	// A torn tail is cut off, so the lines appended next read back.
	if err := f.Truncate(good); err != nil {
		f.Close()
		return nil, fmt.Errorf("agent: backup index: %w", err)
	}
	ix.journal = f
	return ix, nil
}

// replay applies the lines of file to the entries and returns how many
// it read and the length of the file's good part. A line that does not
// decode, or has no newline, ends the replay: only the last one can be
// torn.
func (ix *backupIndex) replay(file string) (n int, good int64, err error) {
	f, err := os.Open(file)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("agent: backup index: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 256<<10)
	for {
		line, err := br.ReadBytes('\n')
		if err == io.EOF {
			return n, good, nil // a last line without its newline is torn
		}
		if err != nil {
			return n, good, fmt.Errorf("agent: backup index: %w", err)
		}
		var e indexEntry
		if json.Unmarshal(line, &e) != nil {
			return n, good, nil
		}
		n++
		good += int64(len(line))
		switch {
		case e.Run == "begin":
			ix.dirty = true
		case e.Run == "end":
			ix.dirty = false
		case e.Del:
			delete(ix.entries, e.Path)
		default:
			ix.entries[e.Path] = &e
		}
	}
}

// get returns the entry of p, nil when there is none. Entries are not
// changed in place: put replaces them.
func (ix *backupIndex) get(p string) *indexEntry {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.entries[p]
}

// append writes one journal line with one write.
func (ix *backupIndex) append(e *indexEntry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if _, err := ix.journal.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("agent: backup index: %w", err)
	}
	ix.jn++
	return nil
}

// put records e, which the server acknowledged.
func (ix *backupIndex) put(e indexEntry) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if err := ix.append(&e); err != nil {
		return err
	}
	ix.entries[e.Path] = &e
	return nil
}

// remove records that p and everything below it are gone from the
// server.
func (ix *backupIndex) remove(p string) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for _, q := range ix.below(p) {
		if err := ix.append(&indexEntry{Path: q, Del: true}); err != nil {
			return err
		}
		delete(ix.entries, q)
	}
	return nil
}

// below returns p and the paths under it. ix.mu is held.
func (ix *backupIndex) below(p string) []string {
	var out []string
	prefix := p + "/"
	for q := range ix.entries {
		if q == p || strings.HasPrefix(q, prefix) {
			out = append(out, q)
		}
	}
	return out
}

// paths returns every path of the index, sorted.
func (ix *backupIndex) paths() []string {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	out := make([]string, 0, len(ix.entries))
	for p := range ix.entries {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// begin marks a run begun; wasDirty reports whether the one before did
// not end.
func (ix *backupIndex) begin() (wasDirty bool, err error) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	wasDirty = ix.dirty
	ix.dirty = true
	return wasDirty, ix.append(&indexEntry{Run: "begin"})
}

// end marks a run ended, makes the journal durable, and folds it into a
// new snapshot once it has grown to a good part of the index.
func (ix *backupIndex) end() error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if err := ix.append(&indexEntry{Run: "end"}); err != nil {
		return err
	}
	ix.dirty = false
	if err := ix.journal.Sync(); err != nil {
		return fmt.Errorf("agent: backup index: %w", err)
	}
	if ix.jn < 1000 || ix.jn < len(ix.entries)/4 {
		return nil
	}
	return ix.compact()
}

// compact writes the entries as a new snapshot and empties the journal.
// ix.mu is held.
func (ix *backupIndex) compact() error {
	var buf bytes.Buffer
	paths := make([]string, 0, len(ix.entries))
	for p := range ix.entries {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		b, err := json.Marshal(ix.entries[p])
		if err != nil {
			return err
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	if err := writePrivate(filepath.Join(ix.dir, indexSnapshot), buf.Bytes()); err != nil {
		return err
	}
	if err := ix.journal.Truncate(0); err != nil {
		return fmt.Errorf("agent: backup index: %w", err)
	}
	ix.jn = 0
	return ix.journal.Sync()
}

// close closes the journal.
func (ix *backupIndex) close() error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.journal.Close()
}
