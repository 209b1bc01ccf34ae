package rest

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"berth/vfs"
)

// A root's or folder's children are written as they are read (see
// vfs.FS.ListEach), so the answer for a folder of any size takes bounded
// memory: the object is encoded without its children, the children are
// written one by one into its "children" array, and the object's last
// field closes it. Optional paging (limit and cursor, docs/api.md "Listing
// paging") lists part of the children, after a name rather than an
// offset, so a page never repeats or skips a child present throughout
// while others come and go.

// Bounds of a listing page.
const (
	// maxListPage is the most children one page lists.
	maxListPage = 1000
)

// listPage is a request's paging of a listing: Limit 0 lists every
// child (the spec's whole children array).
type listPage struct {
	Limit int
	After string
}

// listPageOf reads the optional limit and cursor of a listing. A cursor
// without a limit, or either malformed, is invalid_request: a client that
// pages must say how much it wants, and a cursor is a name (one that
// could not be is no cursor berth gave).
func listPageOf(q url.Values) (listPage, error) {
	var p listPage
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil || n < 1 || n > maxListPage {
			return p, Describe(ErrInvalidRequest, "limit must be a whole number from 1 to %d", maxListPage)
		}
		p.Limit = n
	}
	if q.Has("cursor") {
		if p.Limit == 0 {
			return p, Describe(ErrInvalidRequest, "cursor pages a listing: give limit too")
		}
		b, err := base64.RawURLEncoding.DecodeString(q.Get("cursor"))
		if err != nil || vfs.ValidateName(string(b)) != nil {
			return p, Describe(ErrInvalidRequest, "cursor must be a next_cursor of an earlier page")
		}
		p.After = string(b)
	}
	return p, nil
}

// listedTail is the end of an encoded root or folder object without
// children: its last field, "type", which follows "children".
func listedTail(typ string) []byte { return []byte(`,"type":"` + typ + `"}`) }

// writeListing answers a root or folder object obj (its Hash empty, no
// Children) with the children of folder: the whole list with the hash,
// or 304 when q's hash is current; or one page of them (p.Limit > 0),
// without a hash, with next_cursor when more follow.
func (s *server) writeListing(w http.ResponseWriter, r *http.Request, q url.Values, obj any, typ string, root, folder uint64, p listPage, perms []string) error {
	opts := vfs.ListOptions{After: p.After, Limit: p.Limit, Hash: p.Limit == 0}
	return s.fs.ListEach(r.Context(), root, folder, opts, func(l *vfs.Listing) error {
		if opts.Hash {
			sum, err := listingHash(l.Hash, obj)
			if err != nil {
				return err
			}
			if q.Get("hash") == sum {
				writeBody(w, http.StatusNotModified, notModifiedBody)
				return nil
			}
			switch o := obj.(type) {
			case rootJSON:
				o.Hash = sum
				obj = o
			case folderJSON:
				o.Hash = sum
				obj = o
			}
		}
		head, err := json.Marshal(obj)
		if err != nil {
			return err
		}
		tail := listedTail(typ)
		if !bytes.HasSuffix(head, tail) {
			return fmt.Errorf("rest: a %s object does not end in its type", typ)
		}
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		b := bufio.NewWriterSize(w, 32<<10)
		b.Write(head[:len(head)-len(tail)])
		b.WriteString(`,"children":[`)
		enc := json.NewEncoder(b)
		first := true
		for c, err := range l.Children() {
			if err != nil {
				return err
			}
			if !first {
				b.WriteByte(',')
			}
			first = false
			// Encode adds a newline, which JSON reads as space.
			if err := enc.Encode(encodeNode(c.Node, perms)); err != nil {
				return err
			}
		}
		b.WriteByte(']')
		if next := l.Next(); next != "" {
			b.WriteString(`,"next_cursor":"` + base64.RawURLEncoding.EncodeToString([]byte(next)) + `"`)
		}
		b.Write(tail)
		b.WriteByte('\n')
		return b.Flush()
	})
}
