//go:build unix

package agent

import (
	"io/fs"
	"os"
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

// openNoFollow opens the file at name for reading, failing where its
// last element is a symbolic link (O_NOFOLLOW): the scans skip links,
// and a file swapped for one between a scan and its upload must not have
// the agent read, and send, wherever the link leads.
func openNoFollow(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
}
