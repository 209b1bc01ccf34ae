//go:build !unix

package agent

import (
	"errors"
	"io/fs"
	"os"
)

// inodeOf is 0 where the system has no inodes: size and time decide.
func inodeOf(fs.FileInfo) uint64 { return 0 }

// openNoFollow opens the file at name for reading, failing where it is a
// symbolic link (checked just before, where the system has no
// O_NOFOLLOW): the scans skip links, and a file swapped for one must not
// have the agent read wherever it leads.
func openNoFollow(name string) (*os.File, error) {
	fi, err := os.Lstat(name)
	if err != nil {
		return nil, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, &fs.PathError{Op: "open", Path: name, Err: errors.New("a symbolic link")}
	}
	return os.Open(name)
}
