package rest

import (
	"errors"
	"io"
	"mime"
	"net/http"

	"berth/vfs"
)

// upload stores the `file` part of a multipart/form-data body in the
// folder parent and returns the file object. The body is read part by
// part: the file streams straight from the request into vfs, which
// commits only once all of it has arrived, so a body cut off midway
// stores nothing. Non-file parts before `file` are bounded (fieldBudget);
// a `name` field among them names the file instead of the part's
// filename. Parts after `file` are not read.
func (s *server) upload(r *http.Request, a fsAccess, parent uint64) (any, error) {
	ct, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || ct != "multipart/form-data" {
		return nil, Describe(ErrInvalidRequest, "an upload is a multipart/form-data body with the file in the field `file`")
	}
	if params["boundary"] == "" {
		return nil, Describe(ErrInvalidRequest, "a multipart/form-data body needs a boundary parameter")
	}
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, Describe(ErrInvalidRequest, "the multipart body cannot be read")
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
			if err != nil {
				return nil, err
			}
			if p.FormName() == "name" {
				name = v
			}
			continue
		}
		if name == "" {
			// FileName has already dropped any directory part.
			name = p.FileName()
		}
		if name == "" {
			return nil, Describe(vfs.ErrInvalidName, "the part `file` has no filename and no field `name` came before it")
		}
		body := &partReader{r: p}
		n, err := s.fs.WriteFile(r.Context(), a.root.ID, parent, name, body, a.opts)
		if err != nil && body.err != nil {
			return nil, bodyError(r, body.err)
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
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return Describe(ErrInvalidRequest, "the upload body ended before its closing boundary")
	}
	return Describe(ErrInvalidRequest, "malformed multipart body")
}
