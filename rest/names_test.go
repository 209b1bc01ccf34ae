package rest

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"berth/vfs"
)

// TestNamesKeptAsSent pins berth's choice where the spec is silent
// (docs/api.md, Names): a name is stored and compared byte for byte, with
// no Unicode normalization, when an item is created and when a name
// conflicts; search finds either form. "café" written with a
// precomposed é (NFC, what Windows and Linux send) and with e and a
// combining accent (NFD, what older macOS sends) are two names.
func TestNamesKeptAsSent(t *testing.T) {
	f := newFixture(t)
	const nfc, nfd = "caf\u00e9", "cafe\u0301"
	up := f.at("/api/2/files/%d/upload")
	a := f.mustUpload(up, nfc+".txt", []byte("nfc"))
	if a.Path != "/"+nfc+".txt" {
		t.Fatalf("path %q, want the name as sent", a.Path)
	}
	// The same name in the same form is the same file: a new revision.
	again := f.mustUpload(up, nfc+".txt", []byte("nfc2"))
	if again.ID != a.ID {
		t.Fatalf("same NFC name made a new file %d, want %d", again.ID, a.ID)
	}
	// The other form is another name.
	b := f.mustUpload(up, nfd+".txt", []byte("nfd"))
	if b.ID == a.ID || b.Path != "/"+nfd+".txt" {
		t.Fatalf("NFD upload: %+v", b)
	}
	st, body := f.postForm(f.at("/api/2/files/%d/create_folder"), url.Values{"name": {nfc}})
	if st != http.StatusOK {
		t.Fatalf("create_folder %q: %d %s", nfc, st, body)
	}
	st, body = f.postForm(f.at("/api/2/files/%d/create_folder"), url.Values{"name": {nfc}})
	wantError(t, st, body, http.StatusConflict, "name_conflict")
	if st, body := f.postForm(f.at("/api/2/files/%d/create_folder"), url.Values{"name": {nfd}}); st != http.StatusOK {
		t.Fatalf("create_folder %q: %d %s", nfd, st, body)
	}
	// Search finds both forms for either (vfs.SearchAfter's query
	// forms): every keyboard types NFC, and macOS's WebDAV client
	// writes NFD. Case does not matter either.
	for _, query := range []string{strings.ToUpper(nfc), nfd, "\u00e9"} {
		st, body := f.get(f.at("/api/2/files/%d/search?query=") + url.QueryEscape(query))
		var res struct {
			Results []struct {
				Path string `json:"path"`
			} `json:"results"`
		}
		decode(t, body, &res)
		if st != http.StatusOK || len(res.Results) != 4 {
			t.Fatalf("search %q: %d %s", query, st, body)
		}
	}
}

// A folder or file more than vfs.MaxDepth levels below the root is
// refused in the spec's error form, and nothing is created.
func TestMaxDepthIsInvalidRequest(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	// One transaction (vfs.MkdirAll): a Mkdir per level walked the
	// levels above each, 14 s for this fixture.
	var p strings.Builder
	for i := range vfs.MaxDepth {
		fmt.Fprintf(&p, "/%d", i)
	}
	d, err := f.fs.MkdirAll(ctx, f.root.ID, p.String(), vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	parent := d.ID
	st, b := f.postForm(f.at("/api/2/files/%d/folder/%d/create_folder", parent), url.Values{"name": {"deeper"}})
	wantError(t, st, b, http.StatusBadRequest, "invalid_request")
	if !strings.Contains(string(b), "1000") {
		t.Fatalf("the description does not name the limit: %s", b)
	}
	if kids, _, err := f.fs.List(ctx, f.root.ID, parent); err != nil || len(kids) != 0 {
		t.Fatalf("the deepest folder holds %d items (%v), want none", len(kids), err)
	}
}

// TestRootNames: a root's name is the name of its folder on WebDAV and
// is read by every listing of its organization's roots, so it is held to
// what the store can read back and an XML answer can carry
// (vfs.ValidateRootName). An organization share created or renamed
// with invalid UTF-8 was stored, and the organization's /shares and
// /roots answered 500 from then on; one with a control character or
// U+FFFF made /webdav/ an answer XML cannot hold.
func TestRootNames(t *testing.T) {
	w := newOrgWorld(t)
	st, body := w.postAs(w.childAdmin, orgPath(w.child.ID, "/shares/create"), url.Values{"name": {"Team"}})
	if st != http.StatusOK {
		t.Fatalf("create: %d %s", st, body)
	}
	var team rootJSON
	decode(t, body, &team)
	for _, c := range []struct {
		name   string
		status int // of create and of rename
		code   string
	}{
		{"bad\xffname", 400, "invalid_name"},
		{"nul\x00", 400, "invalid_name"},
		{"line\nbreak", 400, "invalid_name"},
		{"del\x7f", 400, "invalid_name"},
		{"no character \uffff", 400, "invalid_name"},
		{"Sales/EU", 200, ""}, // WebDAV shows it as Sales_EU
		{`back\slash`, 200, ""},
		{"caf\u00e9 \u202eright-to-left", 200, ""},
		{strings.Repeat("x", 300), 200, ""}, // a backup's root is named after a long path
	} {
		st, body := w.postAs(w.childAdmin, orgPath(w.child.ID, "/shares/create"), url.Values{"name": {c.name}})
		if c.code != "" {
			wantError(t, st, body, c.status, c.code)
			if !strings.Contains(string(body), "root's name") {
				t.Errorf("create %q: %s, which does not say the rule of root names", c.name, body)
			}
		} else if st != c.status {
			t.Fatalf("create %q: %d %s", c.name, st, body)
		}
		st, body = w.postAs(w.childAdmin, orgPath(w.child.ID, fmt.Sprintf("/share/%d/update", team.ID)), url.Values{"name": {c.name}})
		if c.code != "" {
			wantError(t, st, body, c.status, c.code)
		} else if st != c.status {
			t.Fatalf("rename to %q: %d %s", c.name, st, body)
		}
		for _, p := range []string{"/shares", "/roots"} {
			if st, body := w.getAs(w.childAdmin, orgPath(w.child.ID, p)); st != http.StatusOK {
				t.Fatalf("after %q: GET %s: %d %s", c.name, p, st, body)
			}
		}
	}
}

// TestUploadFileNames: the name an upload stores is its part's filename
// less any directory part, as each kind of client writes it. Old Windows
// browsers send the whole path with "\", which was refused
// (invalid_name) where the same file sent by any other client was
// stored under its base name.
func TestUploadFileNames(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		disposition string // the file part's Content-Disposition parameters after name="file"
		want        string // the name stored, or "" for a refusal, invalid_name
	}{
		{`filename="plain.txt"`, "plain.txt"},
		{`filename="dir/sub/slash.txt"`, "slash.txt"},
		{`filename="C:\Users\me\ie.txt"`, "ie.txt"}, // as Internet Explorer sends it
		{`filename="C:\\Users\\me\\escaped.txt"`, "escaped.txt"},
		{`filename="..\..\up.txt"`, "up.txt"},
		{`filename*=UTF-8''caf%C3%A9%20%22q%22.txt`, `café "q".txt`},
		{`filename="a%22b.txt"`, "a%22b.txt"}, // kept as sent: no guessing at a browser's escaping
		{"filename=\"bad\xffname.txt\"", ""},
		{`filename*=UTF-8''bad%FF.txt`, ""},
		{`filename=".."`, ""},
	} {
		body := "--XX\r\nContent-Disposition: form-data; name=\"file\"; " + c.disposition + "\r\n\r\nx\r\n--XX--\r\n"
		h := http.Header{"Content-Type": {"multipart/form-data; boundary=XX"}}
		st, b := f.readAll(f.request(http.MethodPost, f.at("/api/2/files/%d/upload"), f.token, strings.NewReader(body), h))
		if c.want == "" {
			wantError(t, st, b, http.StatusBadRequest, "invalid_name")
			continue
		}
		var got fileJSON
		if st != http.StatusOK {
			t.Fatalf("%s: %d %s", c.disposition, st, b)
		}
		decode(t, b, &got)
		if got.Path != "/"+c.want {
			t.Errorf("%s: stored %q, want %q", c.disposition, got.Path, "/"+c.want)
		}
	}
}

// TestNamesWindowsCannotHold pins a choice (docs/api.md, Names): names
// that Windows refuses or changes (its reserved device names, a dot or
// space at the end, the characters NTFS forbids) are stored as sent,
// since berth serves Linux and macOS clients as well, which hold them.
func TestNamesWindowsCannotHold(t *testing.T) {
	f := newFixture(t)
	for _, name := range []string{
		"CON", "aux.txt", "nul", "COM1.log", "LPT9",
		"ends in a dot.", "ends in a space ", " begins with a space",
		`a:b`, `a*b`, `a?b`, `a"b`, `a<b>`, `a|b`, "~$report.docx",
	} {
		st, body := f.postForm(f.at("/api/2/files/%d/create_folder"), url.Values{"name": {name}})
		var got folderJSON
		if st != http.StatusOK {
			t.Fatalf("create_folder %q: %d %s", name, st, body)
		}
		decode(t, body, &got)
		if got.Path != "/"+name {
			t.Errorf("create_folder %q: stored %q", name, got.Path)
		}
	}
}
