package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// applyDelta is the server's reading of a delta body (rest's
// deltaReader), for checking what encodeDelta writes.
func applyDelta(t *testing.T, base, body []byte) []byte {
	t.Helper()
	r := bufio.NewReader(bytes.NewReader(body))
	var out []byte
	for {
		op, err := r.ReadByte()
		if err != nil {
			t.Fatalf("delta without its end mark: %v", err)
		}
		switch op {
		case 'E':
			if _, err := r.ReadByte(); !errors.Is(err, io.EOF) {
				t.Fatal("bytes after the end mark")
			}
			return out
		case 'C':
			off, _ := binary.ReadUvarint(r)
			n, _ := binary.ReadUvarint(r)
			if n == 0 || off+n > uint64(len(base)) {
				t.Fatalf("copy %d+%d outside the base's %d bytes", off, n, len(base))
			}
			out = append(out, base[off:off+n]...)
		case 'D':
			n, _ := binary.ReadUvarint(r)
			b := make([]byte, n)
			if _, err := io.ReadFull(r, b); err != nil {
				t.Fatal(err)
			}
			out = append(out, b...)
		default:
			t.Fatalf("unknown operation %q", op)
		}
	}
}

func randomBytes(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// spans is the base map encodeDelta takes, from a revision's chunks.
func spans(chunks []chunkInfo) map[string]span {
	m := map[string]span{}
	var off int64
	for _, c := range chunks {
		m[string(c.Sum)] = span{off, c.Len}
		off += c.Len
	}
	return m
}

func TestEncodeDelta(t *testing.T) {
	base := randomBytes(1, 9<<20)
	var sink bytes.Buffer
	baseChunks, lit, err := encodeDelta(&sink, bytes.NewReader(base), nil)
	if err != nil || lit != int64(len(base)) {
		t.Fatalf("a whole file: %d literal bytes of %d, %v", lit, len(base), err)
	}
	if got := applyDelta(t, nil, sink.Bytes()); !bytes.Equal(got, base) {
		t.Fatal("a whole file does not come back")
	}
	edit := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), base...)) }
	for _, tc := range []struct {
		name       string
		next       []byte
		maxLiteral int64
	}{
		{"unchanged", base, 0},
		{"a byte changed in the middle", edit(func(b []byte) []byte { b[5<<20] ^= 1; return b }), 2 * 4 << 20},
		{"bytes inserted at the front", edit(func(b []byte) []byte { return append([]byte("hello"), b...) }), 2 * 4 << 20},
		{"appended", edit(func(b []byte) []byte { return append(b, randomBytes(2, 100)...) }), 4<<20 + 100},
		{"cut short", edit(func(b []byte) []byte { return b[:3<<20] }), 4 << 20},
		{"empty", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body bytes.Buffer
			chunks, lit, err := encodeDelta(&body, bytes.NewReader(tc.next), spans(baseChunks))
			if err != nil {
				t.Fatal(err)
			}
			if got := applyDelta(t, base, body.Bytes()); !bytes.Equal(got, tc.next) {
				t.Fatal("the delta does not give the new contents")
			}
			if lit > tc.maxLiteral {
				t.Errorf("%d literal bytes, want at most %d", lit, tc.maxLiteral)
			}
			var n int64
			for _, c := range chunks {
				n += c.Len
			}
			if n != int64(len(tc.next)) {
				t.Errorf("the chunks cover %d bytes of %d", n, len(tc.next))
			}
		})
	}
}

func TestBackupIndex(t *testing.T) {
	dir := t.TempDir()
	ix, err := openIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	if dirty, _ := ix.begin(); dirty {
		t.Fatal("a new index is dirty")
	}
	for _, e := range []indexEntry{{Path: "/a", Dir: true, ID: 1}, {Path: "/a/x", ID: 2, Rev: 3, Size: 5}, {Path: "/a/y", ID: 4}, {Path: "/b", ID: 5}} {
		if err := ix.put(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := ix.remove("/a"); err != nil {
		t.Fatal(err)
	}
	ix.close()
	// A run that did not end, and a torn last line (a crash mid-write).
	f, _ := os.OpenFile(filepath.Join(dir, indexJournal), os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"p":"/c","id":`)
	f.Close()
	ix, err = openIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := ix.paths(); len(got) != 1 || got[0] != "/b" || !ix.dirty {
		t.Fatalf("after a crash: %v, dirty %v", got, ix.dirty)
	}
	// Torn bytes are cut off before the next line, so it reads back.
	if dirty, _ := ix.begin(); !dirty {
		t.Fatal("the run after a crash is not told")
	}
	ix.put(indexEntry{Path: "/d", ID: 9})
	for i := range 1500 {
		ix.put(indexEntry{Path: "/n", ID: uint64(i + 10)})
	}
	if err := ix.end(); err != nil {
		t.Fatal(err)
	}
	ix.close()
	if st, _ := os.Stat(filepath.Join(dir, indexJournal)); st.Size() != 0 {
		t.Errorf("the journal was not folded into the snapshot: %d bytes", st.Size())
	}
	ix, err = openIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.close()
	if got := ix.paths(); len(got) != 3 || ix.get("/n").ID != 1509 || ix.get("/d") == nil || ix.dirty {
		t.Fatalf("after compaction: %v dirty %v", got, ix.dirty)
	}
}

func TestRestoreTarget(t *testing.T) {
	dir := t.TempDir()
	backup := filepath.Join(dir, "docs")
	full := filepath.Join(dir, "full")
	empty := filepath.Join(dir, "empty")
	for _, d := range []string{backup, full, empty} {
		os.Mkdir(d, 0o755)
	}
	os.WriteFile(filepath.Join(full, "f"), nil, 0o644)
	os.WriteFile(filepath.Join(dir, "file"), nil, 0o644)
	for _, tc := range []struct {
		target string
		ok     bool
	}{
		{backup, true},
		{filepath.Join(backup, "sub", "deeper"), true},
		{empty, true},
		{filepath.Join(dir, "new"), true},
		{full, false},
		{filepath.Join(dir, "file"), false},
		{backup + "2", true}, // does not exist: not inside the backup, but new
		{dir, false},
	} {
		if err := targetAllowed(backup, tc.target); (err == nil) != tc.ok {
			t.Errorf("%s: %v, want allowed %v", tc.target, err, tc.ok)
		}
	}
}

// TestRestoresBounded: a machine runs at most maxRestores restores at
// once (each a goroutine with its transfers); one more is refused with
// temporarily_unavailable, where a server, or whoever held it, could have
// the agent start restores without end.
func TestRestoresBounded(t *testing.T) {
	dir := t.TempDir()
	m := &backupManager{jobs: map[uint64]*backupJob{7: {root: 7, local: dir}}, restores: map[*restoreRun]struct{}{}}
	for range maxRestores {
		m.restores[&restoreRun{root: 7}] = struct{}{}
	}
	args := []byte(`{"root_id":7,"path":"/","target":"` + filepath.ToSlash(dir) + `"}`)
	_, err := m.restoreCmd(context.Background(), args)
	var ae *APIError
	if !errors.As(err, &ae) || ae.Code != "temporarily_unavailable" {
		t.Fatalf("a restore past %d: %v, want temporarily_unavailable", maxRestores, err)
	}
	if len(m.restores) != maxRestores {
		t.Fatalf("%d restores held, want %d", len(m.restores), maxRestores)
	}
}

// TestOpenNoFollow: the agent opens what it uploads without following a
// symbolic link in the file's place, where os.Open followed one swapped
// in between a scan (which skips links) and the upload, and sent
// whatever it led to.
func TestOpenNoFollow(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("not the agent's to send"), 0o600); err != nil {
		t.Fatal(err)
	}
	file, link := filepath.Join(dir, "f"), filepath.Join(dir, "l")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		ok   bool
	}{{file, true}, {link, false}} {
		f, err := openNoFollow(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v, want opened %v", tc.name, err, tc.ok)
		}
		if f != nil {
			f.Close()
		}
	}
}
