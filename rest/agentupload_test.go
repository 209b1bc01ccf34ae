package rest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"berth/vfs"
)

// delta builds a delta body (docs/api.md "Agent writes") from ops: a
// []int64{off, len} is a copy, a []byte literal bytes; the end mark is
// added unless noEnd.
func delta(noEnd bool, ops ...any) []byte {
	var b bytes.Buffer
	for _, op := range ops {
		switch v := op.(type) {
		case []int64:
			b.WriteByte('C')
			b.Write(binary.AppendUvarint(nil, uint64(v[0])))
			b.Write(binary.AppendUvarint(nil, uint64(v[1])))
		case []byte:
			b.WriteByte('D')
			b.Write(binary.AppendUvarint(nil, uint64(len(v))))
			b.Write(v)
		case string:
			b.WriteString(v) // raw bytes, for malformed bodies
		}
	}
	if !noEnd {
		b.WriteByte('E')
	}
	return b.Bytes()
}

// agentWrite posts an agent write of fields (in order, name then value)
// and, when body is not nil, the part delta.
func (f *fixture) agentWrite(token string, root uint64, body []byte, fields ...string) (int, []byte) {
	f.t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for i := 0; i+1 < len(fields); i += 2 {
		mw.WriteField(fields[i], fields[i+1])
	}
	if body != nil {
		w, _ := mw.CreateFormField("delta")
		w.Write(body)
	}
	mw.Close()
	h := http.Header{"Content-Type": {mw.FormDataContentType()}}
	return f.readAll(f.request(http.MethodPost, fmt.Sprintf("/api/2/agent/files/%d/write", root), token, &buf, h))
}

func TestAgentWrite(t *testing.T) {
	f := newFixture(t)
	root := f.root.ID
	orig := bytes.Repeat([]byte("0123456789"), 10) // 100 bytes
	var file struct {
		ID         uint64 `json:"id"`
		RevisionID uint64 `json:"revision_id"`
		Path       string `json:"path"`
		Modified   string `json:"modified"`
		Size       int64  `json:"size"`
	}
	status, body := f.agentWrite(f.token, root, delta(false, orig), "path", "/a/b/c.bin", "modified", "2020-01-02T03:04:05.123456789Z")
	if status != 200 {
		t.Fatalf("a new file: %d %s", status, body)
	}
	decode(t, body, &file)
	if file.Path != "/a/b/c.bin" || file.Modified != "2020-01-02T03:04:05" || file.Size != 100 {
		t.Fatalf("a new file: %s", body)
	}
	download := func() []byte {
		t.Helper()
		st, b := f.get(f.at("/api/2/files/%d/%d/download", file.ID))
		if st != 200 {
			t.Fatalf("download: %d %s", st, b)
		}
		return b
	}
	rev1 := file.RevisionID
	// A delta: bytes 0-9, new bytes, bytes 20-99.
	want := append(append(append([]byte{}, orig[:10]...), "XYZ"...), orig[20:]...)
	status, body = f.agentWrite(f.token, root, delta(false, []int64{0, 10}, []byte("XYZ"), []int64{20, 80}),
		"path", "/a/b/c.bin", "modified", "2021-01-01T00:00:00", "base_revision", strconv.FormatUint(rev1, 10))
	if status != 200 {
		t.Fatalf("a delta: %d %s", status, body)
	}
	decode(t, body, &file)
	if got := download(); !bytes.Equal(got, want) || file.RevisionID == rev1 || file.Modified != "2021-01-01T00:00:00" {
		t.Fatalf("after a delta: %q, %s", got, body)
	}
	cur := strconv.FormatUint(file.RevisionID, 10)

	// The folder type makes folders, and answers one already there.
	var dir struct {
		ID   uint64 `json:"id"`
		Type string `json:"type"`
	}
	status, body = f.agentWrite(f.token, root, nil, "path", "/x/y", "type", "folder")
	decode(t, body, &dir)
	if status != 200 || dir.Type != "folder" {
		t.Fatalf("a folder: %d %s", status, body)
	}
	first := dir.ID
	status, body = f.agentWrite(f.token, root, nil, "path", "/x/y", "type", "folder")
	decode(t, body, &dir)
	if status != 200 || dir.ID != first {
		t.Fatalf("a folder again: %d %s, want id %d", status, body, first)
	}

	_, bob, bobToken := f.addPerson("bob")
	for _, tc := range []struct {
		name   string
		token  string
		root   uint64
		body   []byte
		fields []string
		status int
		code   string
	}{
		{"no token", "", root, delta(false, []byte("x")), []string{"path", "/n"}, 401, "access_denied"},
		{"someone else's root", bobToken, root, delta(false, []byte("x")), []string{"path", "/n"}, 404, "not_found"},
		{"a root that does not exist", f.token, 999999, delta(false, []byte("x")), []string{"path", "/n"}, 404, "not_found"},
		{"a base revision no longer current", f.token, root, delta(false, []int64{0, 1}), []string{"path", "/a/b/c.bin", "base_revision", strconv.FormatUint(rev1, 10)}, 409, "name_conflict"},
		{"a base revision of another file", f.token, root, delta(false, []int64{0, 1}), []string{"path", "/other", "base_revision", cur}, 409, "name_conflict"},
		{"a base revision that is not an id", f.token, root, delta(false, []int64{0, 1}), []string{"path", "/a/b/c.bin", "base_revision", "x"}, 400, "invalid_request"},
		{"a copy past the base's end", f.token, root, delta(false, []int64{50, 54}), []string{"path", "/a/b/c.bin", "base_revision", cur}, 400, "invalid_request"},
		{"a copy of nothing", f.token, root, delta(false, []int64{0, 0}), []string{"path", "/a/b/c.bin", "base_revision", cur}, 400, "invalid_request"},
		// Copies may repeat ranges, but all of them together at most
		// twice the base's size: each op a few bytes, a body of them
		// had the server compose (hash, cut, store) terabytes, where a
		// download of the base is what a request may otherwise cost.
		{"copies of more than twice the base", f.token, root, delta(false, []int64{0, 90}, []int64{0, 90}, []int64{0, 90}), []string{"path", "/a/b/c.bin", "base_revision", cur}, 409, "name_conflict"},
		{"a huge offset", f.token, root, delta(false, []int64{1 << 62, 1 << 62}), []string{"path", "/a/b/c.bin", "base_revision", cur}, 400, "invalid_request"},
		{"a copy without a base", f.token, root, delta(false, []int64{0, 1}), []string{"path", "/a/b/c.bin"}, 400, "invalid_request"},
		{"no end mark", f.token, root, delta(true, []byte("abc")), []string{"path", "/a/b/c.bin"}, 400, "invalid_request"},
		{"bytes after the end mark", f.token, root, delta(false, []byte("abc"), "E", "zz"), []string{"path", "/a/b/c.bin"}, 400, "invalid_request"},
		{"a literal cut short", f.token, root, delta(true, "D\x10abc"), []string{"path", "/a/b/c.bin"}, 400, "invalid_request"},
		{"an unknown operation", f.token, root, delta(false, "Q"), []string{"path", "/a/b/c.bin"}, 400, "invalid_request"},
		{"no path", f.token, root, delta(false, []byte("x")), nil, 400, "invalid_request"},
		{"a relative path", f.token, root, delta(false, []byte("x")), []string{"path", "a/b"}, 400, "invalid_request"},
		{"a path with ..", f.token, root, delta(false, []byte("x")), []string{"path", "/a/../b"}, 400, "invalid_request"},
		{"the root itself", f.token, root, delta(false, []byte("x")), []string{"path", "/"}, 400, "invalid_request"},
		{"a bad type", f.token, root, delta(false, []byte("x")), []string{"path", "/n", "type", "link"}, 400, "invalid_request"},
		{"a bad modified", f.token, root, delta(false, []byte("x")), []string{"path", "/n", "modified", "yesterday"}, 400, "invalid_datetime_format"},
		{"no delta", f.token, root, nil, []string{"path", "/n"}, 400, "no_file_received"},
		{"a file where a folder is", f.token, root, delta(false, []byte("x")), []string{"path", "/a/b"}, 409, "name_conflict"},
		{"a folder below a file", f.token, root, nil, []string{"path", "/a/b/c.bin/d", "type", "folder"}, 409, "name_conflict"},
		// Refused before a folder is made or looked up: the folders above
		// were made one by one, each level's lookup walking the path
		// again (a 60 KB path of 30000 levels held the server 2.5 minutes
		// for its 400, and 1001 levels left 1000 folders behind).
		{"a folder deeper than folders nest", f.token, root, nil, []string{"path", "/deep" + strings.Repeat("/a", vfs.MaxDepth), "type", "folder"}, 400, "invalid_request"},
		{"a file deeper than folders nest", f.token, root, delta(false, []byte("x")), []string{"path", "/deep" + strings.Repeat("/a", vfs.MaxDepth)}, 400, "invalid_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := f.agentWrite(tc.token, tc.root, tc.body, tc.fields...)
			wantError(t, status, body, tc.status, tc.code)
		})
	}
	if _, err := f.fs.Lookup(context.Background(), root, "/deep"); !errors.Is(err, vfs.ErrNotExist) {
		t.Fatalf("a path too deep left its folders: %v", err)
	}
	// None of the refused writes changed the file.
	if got := download(); !bytes.Equal(got, want) {
		t.Fatalf("after refused writes: %q", got)
	}
	// Bob writes into his own root; his base revision cannot reach
	// alice's file.
	status, body = f.agentWrite(bobToken, bob.ID, delta(false, []int64{0, 1}), "path", "/a/b/c.bin", "base_revision", cur)
	wantError(t, status, body, 409, "name_conflict")
	// A form body is not an agent write.
	st, b := f.postForm(f.at("/api/2/agent/files/%d/write"), map[string][]string{"path": {"/n"}})
	wantError(t, st, b, 400, "invalid_request")
}

// An agent write into folders that do not exist yet makes them all, and
// what it reads of the store grows with the path's depth, not its square:
// each level was looked up, then made by a Mkdir, each walking the path
// again (a file 300 levels deep read the store 264,098 times, 1,000
// deep some 3 million, seconds of a request; now 6,230 and 21,608).
// Counts, not times: a shared machine's times say little.
func TestAgentWriteDeepReads(t *testing.T) {
	f := newFixture(t)
	perLevel := map[int]float64{}
	for _, depth := range []int{100, 400} {
		p := fmt.Sprint("/t", depth) + strings.Repeat("/a", depth-2) + "/f.txt"
		before := f.stack.DB.TxnStats()
		st, body := f.agentWrite(f.token, f.root.ID, delta(false, []byte("x")), "path", p)
		if st != 200 {
			t.Fatalf("a file %d deep: %d %s", depth, st, body)
		}
		after := f.stack.DB.TxnStats()
		perLevel[depth] = float64(after.Gets+after.Scans-before.Gets-before.Scans) / float64(depth)
		if _, err := f.fs.Lookup(context.Background(), f.root.ID, p); err != nil {
			t.Fatalf("a file %d deep: %v", depth, err)
		}
	}
	// Linear is about the same reads a level at both depths; the square
	// would be four times as many at 400.
	if perLevel[400] > 1.5*perLevel[100] {
		t.Fatalf("reads a level: %.0f at depth 100, %.0f at 400; want them to grow no more than linearly", perLevel[100], perLevel[400])
	}
}
