package web

import (
	"bytes"
	"io"
	"net/http"
	"path"
	"strings"
	"unicode/utf8"

	"berth/httpserve"
	"berth/share"
	"berth/vfs"
)

// Previews on a file link's page. What a file is, is read from its name's
// extension, as its download's Content-Type is, never from its contents.
const (
	previewImage = "image"
	previewPDF   = "pdf"
	previewText  = "text"
)

// PreviewTextMax is how much of a text file its page shows: enough to
// recognise a file, little enough that a page stays light on a phone.
const PreviewTextMax = 64 << 10

// imageExts are the images every current browser shows in an <img>. SVG
// is not among them: it is a document that may carry script, so its page
// shows its source as text instead.
var imageExts = map[string]bool{
	".png": true, ".jpg": true, ".jpeg": true, ".gif": true, ".webp": true, ".avif": true, ".bmp": true,
}

// textExts are the names shown as text beside every text/* type: source,
// configuration and data formats whose types are not text/*.
var textExts = map[string]bool{
	".md": true, ".markdown": true, ".json": true, ".yaml": true, ".yml": true, ".toml": true,
	".ini": true, ".conf": true, ".cfg": true, ".log": true, ".svg": true, ".js": true, ".mjs": true,
	".ts": true, ".go": true, ".py": true, ".rb": true, ".rs": true, ".java": true, ".kt": true,
	".c": true, ".h": true, ".cc": true, ".cpp": true, ".hpp": true, ".cs": true, ".php": true,
	".sh": true, ".bash": true, ".ps1": true, ".sql": true, ".tex": true, ".srt": true, ".vtt": true,
	".diff": true, ".patch": true, ".env": true, ".properties": true, ".gradle": true,
}

// previewKind is how a file of this name is previewed: previewImage,
// previewPDF, previewText, or "" for none.
func previewKind(name string) string {
	ext := strings.ToLower(path.Ext(name))
	switch {
	case imageExts[ext]:
		return previewImage
	case ext == ".pdf":
		return previewPDF
	case textExts[ext] || strings.HasPrefix(httpserve.ContentType(name), "text/"):
		return previewText
	}
	return ""
}

// mayPreview reports whether the visitor may see la's contents on its
// page: a preview shows the contents, so it needs read access, and a
// link with a download_limit has none: it counts nothing, and served a
// limited link's image or PDF, or a text up to PreviewTextMax, without
// end while the limit was not used up.
func mayPreview(la share.LinkAccess) bool {
	return la.Perms.Has(share.Read) && la.Link.DownloadLimit == nil
}

// pdfCSP is the policy of a PDF preview. Browsers refuse to run their
// PDF viewer in a sandboxed document, so it has no sandbox; their viewers
// run a PDF's own scripts in a sandbox of theirs, never as the page's
// origin. It may be framed by berth's own page only.
const pdfCSP = "default-src 'none'; frame-ancestors 'self'"

// preview serves /s/<hash>/preview: the image or PDF a file link's page
// embeds, inline. It is the page's view, already counted when the page
// was opened, so it counts nothing of its own; it needs what the page
// needs to show it (mayPreview), and a file the page would not preview
// is 404.
func (h *handler) preview(w http.ResponseWriter, r *http.Request) {
	la, err := h.open(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if la.Link.Folder() {
		h.fail(w, r, errNoItem)
		return
	}
	n, _, err := h.node(r.Context(), la, la.Link.FileID, false)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	kind := previewKind(n.Name)
	switch {
	case kind != previewImage && kind != previewPDF:
		h.fail(w, r, errNoItem)
		return
	case !la.Perms.Has(share.Read):
		h.fail(w, r, &share.Refusal{Reason: "This share link lets you see what it shares, but not its contents."})
		return
	case la.Link.LimitReached():
		h.fail(w, r, share.ErrDownloadLimit)
		return
	case !mayPreview(la):
		h.fail(w, r, &share.Refusal{Reason: "This share link has a download limit: its contents are shown only by downloading them."})
		return
	}
	f, err := h.opts.FS.Open(r.Context(), la.Root.ID, n.ID)
	if err != nil {
		h.fail(w, r, errNoItem)
		return
	}
	defer f.Close()
	c := httpserve.Content{Name: f.Node.Name, ETag: f.Node.ETag(), Modified: f.Node.Modified, Body: f, Inline: true}
	if kind == previewPDF {
		c.CSP = pdfCSP
		w.Header().Set("X-Frame-Options", "SAMEORIGIN")
	}
	if err := httpserve.ServeContent(w, r, c); err != nil {
		h.abort(r, err)
	}
}

// previewText returns the start of text file n of la to show on its
// page, at most PreviewTextMax bytes cut at a character's end, and
// whether the file goes on. ok is false for contents that are not UTF-8
// text (a NUL byte, a broken sequence): such a file gets no preview.
func (h *handler) previewText(r *http.Request, la share.LinkAccess, n vfs.Node) (text string, more, ok bool) {
	f, err := h.opts.FS.Open(r.Context(), la.Root.ID, n.ID)
	if err != nil {
		return "", false, false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, PreviewTextMax+1))
	if err != nil {
		return "", false, false
	}
	if more = len(b) > PreviewTextMax; more {
		b = b[:PreviewTextMax]
		// Drop a character the cut split (at most 3 bytes of one).
		for i := 0; i < utf8.UTFMax-1 && len(b) > 0 && !utf8.Valid(b); i++ {
			b = b[:len(b)-1]
		}
	}
	if !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0 {
		return "", false, false
	}
	return string(b), more, true
}
