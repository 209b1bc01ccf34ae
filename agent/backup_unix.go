//go:build unix

package agent

import (
	"io/fs"
	"syscall"
)

// inodeOf is the file's inode: a file replaced by another of the same
// size and time (an editor's save by rename) is still seen as changed.
func inodeOf(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}
