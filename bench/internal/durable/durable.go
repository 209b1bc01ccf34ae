// Package durable stores what a benchmark's bare server is sent, durably
// and with nothing else: the file written through the page cache and
// fdatasynced, its folder fsynced. It is the floor the benchmarks compare
// berth's writes against (BenchmarkREST's null-put-durable and davload's
// durable server for bench/webdav.sh): nginx and Apache sync nothing, so
// they are a ceiling no durable server reaches on the same disk, and berth,
// which acknowledges a write only once it is durable, is measured against
// the least such a server must pay as well. One implementation keeps the
// two floors the same floor.
package durable

import (
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Put stores r in name, replacing what was there, and makes it durable:
// WriteFile, then SyncDir of its folder, since a new name is a change of
// the folder. buf is as WriteFile's.
func Put(name string, r io.Reader, buf []byte) error {
	if err := WriteFile(name, r, buf); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(name))
}

// WriteFile creates name (truncating a file already there), copies r into
// it and fdatasyncs it; the folder is not synced (Put does that). buf is
// the copy's buffer: nil for a reader that writes itself out, as
// bytes.Reader does; otherwise its size is the size of each write.
func WriteFile(name string, r io.Reader, buf []byte) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	// Through a plain Writer: os.File's ReadFrom would copy 32 KiB at a
	// time, whatever buf is.
	if _, err := io.CopyBuffer(struct{ io.Writer }{f}, r, buf); err != nil {
		f.Close()
		return err
	}
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// SyncDir fsyncs the folder name, which makes the names created, removed
// or renamed in it durable.
func SyncDir(name string) error {
	d, err := os.Open(name)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
