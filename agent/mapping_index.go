package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// syncEntry is what a mapping last saw in step on both sides for one
// path: the local size and modification time (what the cheap rescans
// compare, never content) and the remote item and revision. A path whose
// local stat and remote revision both still match is unchanged on both
// sides; which one differs says where it changed.
type syncEntry struct {
	Dir    bool   `json:"dir,omitempty"`
	Size   int64  `json:"size,omitempty"`
	Mtime  int64  `json:"mtime,omitempty"` // nanoseconds since the epoch
	RID    uint64 `json:"rid"`             // remote file or folder id
	RRev   uint64 `json:"rrev,omitempty"`  // remote revision_id (files)
	RSize  int64  `json:"rsize,omitempty"` // remote size, to tell same-size edits apart cheaply
	RMtime string `json:"rmod,omitempty"`  // remote modified, as the server wrote it
}

// syncIndex is a mapping's index: the last synced state of every path
// below the mapped folder, keyed by slash-separated relative path. It is
// kept in the agent's state folder, one file per mapping, and written
// whole (temporary file, fsync, rename, fsync of the folder), so a crash
// leaves the previous index or the new one. An index a little behind
// what was done is safe: a path changed on both sides is compared by
// content before anything is called a conflict (mapping.go).
type syncIndex struct {
	Version   int                   `json:"version"`
	MappingID uint64                `json:"mapping_id"`
	RootID    uint64                `json:"root_id"`
	Folder    string                `json:"folder"`
	Entries   map[string]*syncEntry `json:"entries"`
}

const indexVersion = 1

// loadIndex reads the index at path. A missing index, or one made for
// another root or folder, is an empty one: the next cycle is a first
// merge, which never deletes.
func loadIndex(path string, mappingID, rootID uint64, folder string) (*syncIndex, error) {
	empty := &syncIndex{Version: indexVersion, MappingID: mappingID, RootID: rootID, Folder: folder, Entries: map[string]*syncEntry{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return empty, nil
	}
	if err != nil {
		return nil, fmt.Errorf("agent: mapping index: %w", err)
	}
	var ix syncIndex
	if err := json.Unmarshal(b, &ix); err != nil || ix.Version != indexVersion || ix.RootID != rootID || ix.Folder != folder {
		return empty, nil
	}
	if ix.Entries == nil {
		ix.Entries = map[string]*syncEntry{}
	}
	return &ix, nil
}

// save writes the index to path crash-safely.
func (ix *syncIndex) save(path string) error {
	b, err := json.Marshal(ix)
	if err != nil {
		return err
	}
	return writePrivate(path, b)
}

// index records e as path p's synced state; the cycle saves the index
// when anything was recorded.
func (s *syncer) index(p string, e *syncEntry) {
	s.ix.Entries[p] = e
	s.ixChanged = true
}

// unindex forgets path p.
func (s *syncer) unindex(p string) {
	if _, ok := s.ix.Entries[p]; ok {
		delete(s.ix.Entries, p)
		s.ixChanged = true
	}
}
