package web

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"

	"berth/httpserve"
	"berth/share"
)

// maxUploadFields bounds what a form may send before the file: the CSRF
// token and its part headers take some hundred bytes.
const maxUploadFields = 4 << 10

// canWrite reports whether the visitor may upload through la.
func (h *handler) canWrite(r *http.Request, la share.LinkAccess) bool {
	if !la.Link.Folder() || !la.Perms.Has(share.Write) || h.opts.Accounts == nil {
		return false
	}
	_, err := h.opts.Share.LinkWrite(r.Context(), la, h.caller(r))
	return err == nil
}

// upload handles POST /s/<hash>/upload[?folder=id]: a multipart form whose
// first part is the CSRF token and whose next are the files. It writes
// through share.LinkWrite, under the link creator's policy and quota, and
// never replaces a file: a taken name is 409. The creator is told when
// the link has upload_notify. Success goes back to the folder's page.
func (h *handler) upload(w http.ResponseWriter, r *http.Request) {
	la, err := h.open(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if !la.Link.Folder() {
		h.fail(w, r, errNoItem)
		return
	}
	n, _, err := h.folder(r, la)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	a, err := h.opts.Share.LinkWrite(r.Context(), la, h.caller(r))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	ck, cerr := r.Cookie(csrfCookie)
	if ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || ct != "multipart/form-data" {
		h.problem(w, r, http.StatusBadRequest, "Bad request", "An upload is a multipart form.")
		return
	}
	// A refusal once the body has begun to arrive (a full disk, a name
	// taken, a form from elsewhere) reads the rest of it first, within
	// bounds (httpserve.Drain): net/http answering with more than 256 KiB
	// unread closes the connection, and the browser, still sending,
	// showed a reset in place of the page that says why.
	body := &httpserve.CountingBody{R: r.Body}
	r.Body = struct {
		io.Reader
		io.Closer
	}{body, r.Body}
	mr, err := r.MultipartReader()
	if err != nil {
		h.problem(w, r, http.StatusBadRequest, "Bad request", "The form could not be read.")
		return
	}
	p, err := mr.NextPart()
	var tok []byte
	if err == nil && p.FormName() == "csrf" {
		tok, _ = io.ReadAll(io.LimitReader(p, maxUploadFields))
	}
	if cerr != nil || !sameOrigin(r) || len(ck.Value) < 22 || subtle.ConstantTimeCompare([]byte(ck.Value), tok) != 1 {
		httpserve.Drain(r, body)
		h.problem(w, r, http.StatusForbidden, "Form expired", "The upload form was not sent from this page. Open the link again and upload.")
		return
	}
	// Each further part is a file (the form's input takes several, and
	// a drop sends them all), written in order; one that fails ends the
	// upload, and the page says how many went before it, which stay.
	done := 0
	for {
		p, err = mr.NextPart()
		if errors.Is(err, io.EOF) && done > 0 {
			break
		}
		var name string
		if err == nil && p.FormName() == "file" {
			name = httpserve.FileName(p)
		}
		if name == "" {
			httpserve.Drain(r, body)
			h.problem(w, r, http.StatusBadRequest, "No file", "Choose a file to upload."+uploadedBefore(done))
			return
		}
		opts := a.Opts
		opts.IfAbsent = true
		f, err := h.opts.FS.WriteFile(r.Context(), a.Root.ID, n.ID, name, p, opts)
		if err != nil {
			httpserve.Drain(r, body)
			h.uploadFailed(w, r, la, err, done)
			return
		}
		done++
		h.opts.Share.CountUpload(r.Context(), la, f.Name)
	}
	back := Prefix + la.Link.Hash
	if n.ID != la.Link.FolderID {
		back += "?folder=" + strconv.FormatUint(n.ID, 10)
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// uploadFailed writes the page of a file upload that failed with err,
// after done files of the same form were stored: the pages' table
// (pageProblem), except that a failure it does not know is the upload's
// (a body cut short, a client gone), not berth's.
func (h *handler) uploadFailed(w http.ResponseWriter, r *http.Request, la share.LinkAccess, err error, done int) {
	if status, _, _ := pageProblem(err); status == 0 {
		if r.Context().Err() == nil {
			h.log.Warn("share-link upload", "link", la.Link.ID, "error", err)
		}
		h.problem(w, r, http.StatusBadRequest, "Upload failed", "The file could not be stored. Try again."+uploadedBefore(done))
		return
	}
	h.failAfter(w, r, err, uploadedBefore(done))
}

// uploadedBefore tells how many files of a form were stored before the
// one that failed.
func uploadedBefore(done int) string {
	switch done {
	case 0:
		return ""
	case 1:
		return " The file before it was uploaded."
	}
	return fmt.Sprintf(" The %d files before it were uploaded.", done)
}
