package durable

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"testing/iotest"

	"golang.org/x/sync/errgroup"
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

// TestLog: records appended from many writers at once, small and longer
// than the buffer, are all in the file whole; a body that fails is an
// error, and the log takes nothing after it.
func TestLog(t *testing.T) {
	name := filepath.Join(t.TempDir(), "log")
	l, err := OpenLog(name)
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 50
	body := func(w, i int) []byte {
		n := 4096
		if i%10 == 0 {
			n = 3000 + 64<<10 // longer than the buffer below
		}
		return bytes.Repeat([]byte{byte(w), byte(i)}, n/2)
	}
	var g errgroup.Group
	for w := range writers {
		g.Go(func() error {
			buf := make([]byte, 64<<10)
			for i := range each {
				key := fmt.Sprintf("w%d/f%d", w, i)
				if err := l.Append("PUT", key, bytes.NewReader(body(w, i)), buf); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}

	// Read it back: every record whole, each key once with its body.
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	r := bytes.NewReader(data)
	str := func() string {
		n, err := binary.ReadUvarint(r)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, n)
		io.ReadFull(r, b)
		return string(b)
	}
	for r.Len() > 0 {
		op, key := str(), str()
		var w, i int
		if _, err := fmt.Sscanf(key, "w%d/f%d", &w, &i); err != nil || op != "PUT" {
			t.Fatalf("record %q %q", op, key)
		}
		want := body(w, i)
		got := make([]byte, len(want))
		io.ReadFull(r, got)
		if n, err := binary.ReadUvarint(r); err != nil || n != uint64(len(want)) || !bytes.Equal(got, want) {
			t.Fatalf("%s: length %d (%v), body equal %v", key, n, err, bytes.Equal(got, want))
		}
		seen[key] = true
	}
	if len(seen) != writers*each {
		t.Fatalf("%d records, want %d", len(seen), writers*each)
	}

	failed := errors.New("client went away")
	buf := make([]byte, 1024)
	if err := l.Append("PUT", "broken", io.MultiReader(bytes.NewReader(make([]byte, 4096)), iotest.ErrReader(failed)), buf); !errors.Is(err, failed) {
		t.Fatalf("failing body: %v", err)
	}
	if err := l.Append("MKCOL", "after", nil, buf); !errors.Is(err, failed) {
		t.Fatalf("append after a broken record: %v, want the first error", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}
