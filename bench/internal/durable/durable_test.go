package durable

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestPut: what Put and WriteFile are given is what the file holds, with
// any buffer, over an older and longer file; a folder that is not there
// or a body that fails is an error.
func TestPut(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 10_000) // 160,000 bytes
	failed := errors.New("the client went away")
	rows := []struct {
		name    string
		before  []byte // the file already there; nil: none
		body    func() io.Reader
		want    []byte
		buf     []byte
		missing bool                                  // into a folder that is not there
		write   func(string, io.Reader, []byte) error // nil: Put
		err     error                                 // what the error is; nil: none
	}{
		{name: "empty body", body: func() io.Reader { return bytes.NewReader(nil) }, want: []byte{}},
		{name: "small body, no buffer", body: func() io.Reader { return bytes.NewReader([]byte("hello")) }, want: []byte("hello")},
		{name: "body longer than the buffer", body: func() io.Reader { return onlyReader{bytes.NewReader(big)} }, want: big, buf: make([]byte, 4096)},
		{name: "replaces a longer file", before: big, body: func() io.Reader { return bytes.NewReader([]byte("short")) }, want: []byte("short")},
		{name: "WriteFile alone", body: func() io.Reader { return onlyReader{bytes.NewReader(big)} }, want: big, buf: make([]byte, 1<<20), write: WriteFile},
		{name: "folder not there", body: func() io.Reader { return bytes.NewReader([]byte("x")) }, missing: true, err: os.ErrNotExist},
		{name: "body fails", body: func() io.Reader { return io.MultiReader(bytes.NewReader(big), errReader{failed}) }, buf: make([]byte, 4096), err: failed},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			dir := t.TempDir()
			name := filepath.Join(dir, "put.bin")
			if row.missing {
				name = filepath.Join(dir, "nowhere", "put.bin")
			}
			if row.before != nil {
				if err := os.WriteFile(name, row.before, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			write := Put
			if row.write != nil {
				write = row.write
			}
			err := write(name, row.body(), row.buf)
			if row.err != nil {
				if !errors.Is(err, row.err) {
					t.Fatalf("error %v, want %v", err, row.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, row.want) {
				t.Fatalf("the file holds %d bytes, want the %d sent", len(got), len(row.want))
			}
		})
	}
}

// TestSyncDir: a folder that is not there is an error, not a silent sync.
func TestSyncDir(t *testing.T) {
	if err := SyncDir(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(filepath.Join(t.TempDir(), "nowhere")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("error %v, want one that is os.ErrNotExist", err)
	}
}

// onlyReader hides bytes.Reader's WriteTo, so the copy goes through buf.
type onlyReader struct{ io.Reader }

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
