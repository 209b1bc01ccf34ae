package web_test

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"strconv"
	"strings"
	"testing"

	"berth/share"
	"berth/vfs"
	"berth/web"
)

// pngBytes is a real 40x30 PNG, for a browser to draw.
func pngBytes(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 40, 30))
	for x := range 40 {
		for y := range 30 {
			img.Set(x, y, color.RGBA{R: uint8(x * 6), G: 80, B: uint8(y * 8), A: 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// write stores a file named name in alice's root.
func (s *site) write(t *testing.T, name string, body []byte) vfs.Node {
	t.Helper()
	n, err := s.st.FS.WriteFile(context.Background(), s.root.ID, s.root.FolderID, name, bytes.NewReader(body), share.WriteOptions(s.alice))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPreviews: a file link's page previews images and PDFs (embedded
// from /preview, inline) and text (in the page, escaped, cut at
// PreviewTextMax on a character's end); other files, and contents that
// are not text, get none. A preview needs read access and ends with a
// used-up download_limit, and counts nothing of its own.
func TestPreviews(t *testing.T) {
	s := newSite(t)
	long := strings.Repeat("é", web.PreviewTextMax/2-1) + "xyz" // a 2-byte character split by the cut
	files := map[string][]byte{
		"photo.png":   pngBytes(t),
		"notes.md":    []byte("# Title\n<script>alert(1)</script>\n"),
		"long.txt":    []byte(long),
		"drawing.svg": []byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`),
		"binary.txt":  []byte("text\x00with a NUL"),
		"latin1.txt":  []byte("caf\xe9"),
		"archive.zip": []byte("PK\x03\x04 not really"),
	}
	urls := map[string]string{}
	for name, body := range files {
		_, urls[name] = s.link(t, s.write(t, name, body), share.LinkSettings{})
	}
	_, pdf := s.link(t, s.file, share.LinkSettings{})
	_, noRead := s.link(t, s.write(t, "secret.png", pngBytes(t)), share.LinkSettings{ReadAccess: ptr(false)})
	usedLink, used := s.link(t, s.write(t, "once.png", pngBytes(t)), share.LinkSettings{DownloadLimit: ptr(ptr(int64(1)))})
	if resp, _ := get(t, used+"/download"); resp.StatusCode != 200 {
		t.Fatalf("first download %d", resp.StatusCode)
	}
	_, limited := s.link(t, s.write(t, "twice.png", pngBytes(t)), share.LinkSettings{DownloadLimit: ptr(ptr(int64(2)))})
	_, limitedText := s.link(t, s.write(t, "twice.txt", []byte("plain words")), share.LinkSettings{DownloadLimit: ptr(ptr(int64(2)))})
	_, folder := s.link(t, s.docs, share.LinkSettings{})
	// Who asks: the preview opens the link as its page and download do.
	loginLink, login := s.link(t, s.write(t, "members.png", pngBytes(t)), share.LinkSettings{LoginRequired: ptr(true)})
	byID := s.srv.URL + web.Prefix + strconv.FormatUint(loginLink.ID, 10)
	const html = "text/html; charset=utf-8"
	tests := []struct {
		name          string
		url           string
		status        int
		ctype         string
		want, absent  []string
		disposition   string // prefix; "" unchecked
		csp, frameOpt string // "" unchecked
	}{
		{"image page", urls["photo.png"], 200, html, []string{`<img id="preview" src="/s/`, `/preview"`}, nil, "", "", ""},
		{"image preview", urls["photo.png"] + "/preview", 200, "image/png", []string{"\x89PNG"}, nil, "inline", "default-src 'none'; sandbox; frame-ancestors 'none'", "DENY"},
		{"pdf page", pdf, 200, html, []string{`<iframe id="preview" class="pdf" src="/s/`}, nil, "", "", ""},
		{"pdf preview", pdf + "/preview", 200, "application/pdf", []string{"%PDF-1.4"}, nil, "inline", "default-src 'none'; frame-ancestors 'self'", "SAMEORIGIN"},
		{"text page, escaped", urls["notes.md"], 200, html, []string{`<pre id="preview">`, "# Title", "&lt;script&gt;alert(1)&lt;/script&gt;"}, []string{"<script>alert", "preview-more"}, "", "", ""},
		{"svg shown as its source", urls["drawing.svg"], 200, html, []string{`<pre id="preview">`, "&lt;svg"}, []string{"<svg", "<img"}, "", "", ""},
		{"long text cut on a character", urls["long.txt"], 200, html, []string{`id="preview-more"`, "The first 65.5 KB are shown"}, []string{"xyz", "\ufffd"}, "", "", ""},
		{"text has no /preview", urls["notes.md"] + "/preview", 404, html, []string{"Link not found"}, nil, "", "", ""},
		{"NUL: no preview", urls["binary.txt"], 200, html, []string{"binary.txt"}, []string{`id="preview"`}, "", "", ""},
		{"not UTF-8: no preview", urls["latin1.txt"], 200, html, []string{"latin1.txt"}, []string{`id="preview"`}, "", "", ""},
		{"other types: none", urls["archive.zip"], 200, html, []string{"archive.zip", "Download"}, []string{`id="preview"`}, "", "", ""},
		{"other types: no /preview", urls["archive.zip"] + "/preview", 404, html, nil, nil, "", "", ""},
		{"no read access: no preview", noRead, 200, html, []string{"secret.png"}, []string{`id="preview"`}, "", "", ""},
		{"no read access: /preview refused", noRead + "/preview", 403, html, nil, []string{"\x89PNG"}, "", "", ""},
		{"limit used up: no preview", used, 200, html, []string{"once.png"}, []string{`id="preview"`}, "", "", ""},
		{"limit used up: /preview refused", used + "/preview", 403, html, []string{"Download limit reached"}, nil, "", "", ""},
		{"a limit left: no preview", limited, 200, html, []string{"twice.png"}, []string{`id="preview"`}, "", "", ""},
		{"a limit left: /preview refused", limited + "/preview", 403, html, []string{"download limit"}, []string{"\x89PNG"}, "", "", ""},
		{"a limit left: no text preview", limitedText, 200, html, []string{"twice.txt"}, []string{`id="preview"`, "plain words"}, "", "", ""},
		{"folder link: no /preview", folder + "/preview", 404, html, nil, nil, "", "", ""},
		{"login_required, anonymous: the sign-in form", login + "/preview", 401, html, []string{`id="signin"`}, []string{"\x89PNG"}, "", "", ""},
		{"by the link's id", byID + "/preview", 404, html, []string{"Link not found"}, nil, "", "", ""},
		{"a wrong hash", s.srv.URL + web.Prefix + "wrongwrongwrongwrongwron/preview", 404, html, []string{"Link not found"}, nil, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := get(t, tt.url)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %.300s", resp.StatusCode, tt.status, body)
			}
			h := resp.Header
			if got := h.Get("Content-Type"); got != tt.ctype {
				t.Errorf("Content-Type %q, want %q", got, tt.ctype)
			}
			checkBody(t, body, tt.want, tt.absent)
			if tt.disposition != "" && !strings.HasPrefix(h.Get("Content-Disposition"), tt.disposition) {
				t.Errorf("Content-Disposition %q", h.Get("Content-Disposition"))
			}
			if tt.csp != "" && h.Get("Content-Security-Policy") != tt.csp {
				t.Errorf("Content-Security-Policy %q, want %q", h.Get("Content-Security-Policy"), tt.csp)
			}
			if tt.frameOpt != "" && h.Get("X-Frame-Options") != tt.frameOpt {
				t.Errorf("X-Frame-Options %q, want %q", h.Get("X-Frame-Options"), tt.frameOpt)
			}
		})
	}
	// Previews are the page's view: they counted no download.
	l, err := s.shares.ManagedLink(context.Background(), s.alice, usedLink.Hash)
	if err != nil {
		t.Fatal(err)
	}
	if l.TimesDownloaded != 1 {
		t.Errorf("times_downloaded %d after one download and previews, want 1", l.TimesDownloaded)
	}
}
