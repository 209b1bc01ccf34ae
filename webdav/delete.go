package webdav

import (
	"errors"
	"net/http"
	"strings"

	"berth/vfs"
)

// delete removes a resource (soft delete: it stays restorable over REST).
// The caller's role allows it (serve asked).
func (s *session) delete(w http.ResponseWriter, r *http.Request) error {
	if t, err := s.resolve(s.path); err == nil && !t.isMountRoot() && r.Header.Get("If") == "" {
		// vfs looks the item up in the commit, where the checks below
		// run: If-Match, If-None-Match and If-Unmodified-Since are
		// judged against the item the commit deletes, a folder as
		// much as a file, so an item that came to the path since a
		// check, or a revision that landed, is never deleted unseen.
		var refused error
		opts := s.optsFor(t.m.root.ID)
		// A collection's tag is its listing's, read in the commit only
		// for conditions that may judge it.
		opts.Listing = judgesTags(r)
		err := s.h.opts.FS.DeleteAt(s.ctx, t.m.root.ID, t.rel, opts, func(n vfs.Node) error {
			refused = deleteRefusal(r, n)
			if refused == nil {
				refused = writeConditions(r, n, true)
			}
			if refused == nil {
				refused = s.readOnly(t, n)
			}
			return refused
		})
		if errors.Is(err, vfs.ErrNotExist) && err != refused {
			return vfs.ErrNotExist // lookup's answer
		}
		if err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	t, n, err := s.lookupItem("a root folder cannot be deleted over WebDAV")
	if err != nil {
		return err
	}
	if err := deleteRefusal(r, n); err != nil {
		return err
	}
	if judgesTags(r) {
		// A collection's tag is its listing's: sameItem holds it at
		// the commit, as IfRevision does a file's revision.
		if err := s.listed(&n); err != nil {
			return err
		}
	}
	if err := s.preconditions(r, s.path, n, true); err != nil {
		return err
	}
	if err := s.readOnly(t, n); err != nil {
		return err
	}
	// An If header reads the store (lock tokens, other resources), so
	// it is judged before the commit. The other conditions held for
	// the file at this revision; the delete holds them at its commit
	// too (412 for one that landed since). A folder's ETag, of its
	// listing, is held at the commit by sameItem; its date does not
	// change while it lives. The delete is of the item at the path in
	// its commit, and only while that is the item judged (sameItem): by
	// its id, it deleted the item wherever a MOVE had taken it since.
	opts := s.optsFor(t.m.root.ID)
	if conditional(r) && !n.Dir {
		opts.IfRevision = n.RevisionID
	}
	opts.Listing = n.Listing != "" // read above: its tag is judged
	if err := s.h.opts.FS.DeleteAt(s.ctx, t.m.root.ID, t.rel, opts, sameItem(n)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// sameItem is a commit's check (vfs.DeleteAt, MoveAt) that the item it
// finds at the request's path is n, the one the request's If header was
// judged on before it: another that came to the path since is
// errPrecondition (412), as the If header was never judged on it. Where
// n's tag was judged, a collection (n.Listing read) whose listing changed
// since is 412 too: its tag is no longer the one that held.
func sameItem(n vfs.Node) func(vfs.Node) error {
	return func(at vfs.Node) error {
		if at.ID != n.ID {
			return describe(errPrecondition, "the conditions were judged on another item than the one now at this path")
		}
		if n.Listing != "" && at.Listing != n.Listing {
			return describe(errPrecondition, "the collection's members changed since its entity tag was judged")
		}
		return nil
	}
}

// deleteRefusal refuses r, a DELETE of n, for what it asks of n itself,
// before its conditions: a URL that ends in "/" names a collection, and n
// is a file (404, fileAsCollection's answer); a collection is deleted with
// Depth infinity only (400: RFC 4918 9.6.1, a client that asks for less
// does not mean to delete what it holds).
func deleteRefusal(r *http.Request, n vfs.Node) error {
	switch d := r.Header.Get("Depth"); {
	case !n.Dir && strings.HasSuffix(r.URL.EscapedPath(), "/"):
		return notACollection(n)
	case n.Dir && d != "" && !strings.EqualFold(d, "infinity"):
		return describe(errBadDepth, "DELETE of a collection takes Depth: infinity only")
	}
	return nil
}
