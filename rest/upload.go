package rest

import (
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"

	"berth/httpserve"
	"berth/vfs"
)

// upload stores the `file` part of a multipart/form-data body in the
// folder parent and returns the file object. The body is read part by
// part: the file streams straight from the request into vfs, which
// commits only once all of it has arrived, so a body cut off midway
// stores nothing. Non-file parts before `file` are bounded (fieldBudget);
// a `name` field among them names the file instead of the part's
// filename. Parts after `file` are not read.
//
// A refusal decided once the body has begun to arrive (a name taken by a
// folder, a full disk, a file over the limits) is answered only after
// the rest of the body has been read and discarded, within bounds
// (httpserve.Drain): a client that sent Expect: 100-continue was told to go on
// at the first read, and net/http, answering with most of the body
// unread, would close the connection under the client, which then loses
// the answer to a reset ("broken pipe").
func (s *server) upload(r *http.Request, a fsAccess, parent uint64) (_ any, err error) {
	h := r.Header.Get("Content-Type")
	ct, params, err := mime.ParseMediaType(h)
	switch {
	case h != "" && err != nil:
		return nil, Describe(ErrInvalidRequest, "the Content-Type cannot be parsed")
	case ct != "multipart/form-data":
		// No body, a raw one, a url-encoded form: none has the field
		// `file`, which is what spec 7.3's no_file_received says.
		return nil, Describe(ErrNoFileReceived, "the file `file` is missing: an upload is a multipart/form-data body with the file in the field `file`")
	}
	if params["boundary"] == "" {
		return nil, Describe(ErrInvalidRequest, "a multipart/form-data body needs a boundary parameter")
	}
	mr, orig, head, err := streamedMultipart(r)
	defer func() {
		if err != nil {
			httpserve.Drain(r, orig)
		}
	}()
	if err != nil {
		return nil, err
	}
	budget := &fieldBudget{left: maxFormBytes, parts: maxFormParts}
	var name string
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return nil, ErrNoFileReceived
		}
		if err != nil {
			return nil, bodyError(r, err)
		}
		if p.FormName() != "file" {
			v, err := budget.read(p)
			if errors.Is(err, errUploadHead) {
				return nil, bodyError(r, err)
			}
			if err != nil {
				return nil, err
			}
			if p.FormName() == "name" {
				name = v
			}
			continue
		}
		if name == "" {
			// FileName has already dropped any directory part, "/" or "\".
			name = httpserve.FileName(p)
		}
		if name == "" {
			return nil, Describe(vfs.ErrInvalidName, "the part `file` has no filename and no field `name` came before it")
		}
		opts, err := s.uploadOptions(r.Context(), r, a, parent, name)
		if err != nil {
			return nil, nameError(false, err)
		}
		if httpserve.Conditional(r) {
			if opts, err = s.uploadConditions(r, a, parent, name, opts); err != nil {
				return nil, nameError(false, err)
			}
		}
		head.left = -1 // the file's contents: the policy's limits apply
		body := &partReader{r: p}
		n, err := s.fs.WriteFile(r.Context(), a.root.ID, parent, name, body, opts)
		if err != nil && body.err != nil {
			return nil, bodyError(r, body.err)
		}
		if errors.Is(err, vfs.ErrExtensionExcluded) {
			// An upload the policy refuses is policy_error (issue 12,
			// spec 8's "409 policy_error or 400 invalid_extension"):
			// invalid_extension is a rename's or move's answer.
			return nil, Describe(errUploadExcluded, "the organization's policy does not allow uploads of files with this extension (excluded_extensions: %s)", strings.Join(a.opts.ExcludedExtensions, ","))
		}
		if err != nil {
			return nil, nameError(false, err)
		}
		return encodeFile(n, a.perms), nil
	}
}

// partReader remembers the first error reading the request body, which
// tells a client's broken upload apart from a failure of the store.
type partReader struct {
	r   io.Reader
	err error
}

func (p *partReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if err != nil && err != io.EOF && p.err == nil {
		p.err = err
	}
	return n, err
}

// bodyError describes a request body that could not be read as multipart
// to its end: cut off, or broken framing. A cancelled request keeps its
// context error, so the adapter sees that the client left.
func bodyError(r *http.Request, err error) error {
	if r.Context().Err() != nil {
		return r.Context().Err()
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return err
	}
	if errors.Is(err, errUploadHead) {
		return Describe(ErrInvalidRequest, "the parts before the file's contents (fields, part headers) are larger than %d bytes", maxUploadHead)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return Describe(ErrInvalidRequest, "the upload body ended before its closing boundary")
	}
	return Describe(ErrInvalidRequest, "malformed multipart body")
}

// maxUploadHead bounds what an upload sends before the file's contents:
// the fields (maxFormBytes) with their part headers and boundaries, and
// the file part's own headers. mime/multipart alone holds up to 10 MiB of
// one part's headers; a browser or client sends some hundred bytes each.
const maxUploadHead = 2 * maxFormBytes

// errUploadHead is a body whose parts before the file's contents are over
// maxUploadHead.
var errUploadHead = errors.New("upload: too much before the file")

// headReader reads the body of an upload, failing with errUploadHead once
// more than left bytes came before the file's contents; left < 0 lifts
// the bound, which the file part is held to by the policy instead.
type headReader struct {
	r    io.Reader
	left int64
}

func (h *headReader) Read(b []byte) (int, error) {
	if h.left < 0 {
		return h.r.Read(b)
	}
	if h.left == 0 {
		return 0, errUploadHead
	}
	if int64(len(b)) > h.left {
		b = b[:h.left]
	}
	n, err := h.r.Read(b)
	h.left -= int64(n)
	return n, err
}

// streamedMultipart prepares r's body for a streamed multipart read: counted
// (orig, for httpserve.Drain when the handler fails) and with what comes before
// the contents bounded (head, until the handler lifts it), and returns its
// reader.
func streamedMultipart(r *http.Request) (mr *multipart.Reader, orig *httpserve.CountingBody, head *headReader, err error) {
	orig = &httpserve.CountingBody{R: r.Body}
	head = &headReader{r: orig, left: maxUploadHead}
	r.Body = struct {
		io.Reader
		io.Closer
	}{head, r.Body}
	if mr, err = r.MultipartReader(); err != nil {
		return nil, orig, head, Describe(ErrInvalidRequest, "the multipart body cannot be read")
	}
	return mr, orig, head, nil
}
