package webdav

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"berth/share"
	"berth/vfs"
)

// sameAuthority reports whether two host[:port] authorities name this
// server alike: hosts compare without case, and a default port (443, 80)
// is the same as none (RFC 3986 6.2.2.1, 6.2.3). Either default counts
// for either scheme, because a TLS-terminating proxy hands on https
// requests as http ones; the Destination's scheme is not compared for
// the same reason, but for being http or https at all (destination).
func sameAuthority(a, b string) bool {
	trim := func(h string) string {
		for _, p := range []string{":443", ":80"} {
			if s, ok := strings.CutSuffix(h, p); ok {
				return s
			}
		}
		return h
	}
	return strings.EqualFold(trim(a), trim(b))
}

// destination is a COPY's or MOVE's Destination header, parsed once a
// request (session.destination).
type destination struct {
	path  string // its clean dav path
	slash bool   // its path ends in "/" (names a collection)
	// err says why it names nothing on this server: errBadDestination
	// (400), errOtherServer (502).
	err error
}

// destination is the request's Destination, parsed on first use: the
// lookups before the method (fileAsCollection, lookupPair) and the
// method need it alike.
func (s *session) destination(r *http.Request) *destination {
	if s.dest != nil {
		return s.dest
	}
	d := &destination{}
	s.dest = d
	dh := r.Header.Get("Destination")
	if dh == "" {
		d.err = describe(errBadDestination, "Destination header required")
		return d
	}
	u, err := url.Parse(dh)
	switch {
	case err != nil:
		d.err = errBadDestination
	case u.Host != "" && !sameAuthority(u.Host, r.Host):
		d.err = errOtherServer
	case u.Scheme != "" && !strings.EqualFold(u.Scheme, "https") && !strings.EqualFold(u.Scheme, "http"):
		// file:///webdav/... or javascript:/webdav/... names nothing
		// this server serves, whatever its path says.
		d.err = errOtherServer
	default:
		if d.path, err = s.h.davPath(u.EscapedPath()); err != nil {
			d.err = describe(errBadDestination, "Destination: %v", err)
		}
		d.slash = strings.HasSuffix(u.EscapedPath(), "/")
	}
	return d
}

// copyMoveHeaders are a COPY's or MOVE's Depth ("infinity", "0" or "1")
// and Overwrite, or the error that refuses them (400).
func copyMoveHeaders(r *http.Request) (depth string, overwrite bool, err error) {
	depth = r.Header.Get("Depth")
	switch {
	case depth == "" || strings.EqualFold(depth, "infinity"):
		depth = "infinity"
	case depth == "0" || depth == "1":
	default:
		return "", false, errBadDepth
	}
	switch r.Header.Get("Overwrite") {
	case "", "T", "t":
		return depth, true, nil
	case "F", "f":
		return depth, false, nil
	}
	return "", false, errBadOverwrite
}

// copyMove handles COPY and MOVE with Destination, Overwrite and Depth.
func (s *session) copyMove(w http.ResponseWriter, r *http.Request) error {
	move := r.Method == "MOVE"
	d := s.destination(r)
	if d.err != nil {
		return d.err
	}
	dstPath := d.path
	if err := s.permitted(dstPath, share.Write); err != nil {
		return err
	}
	depth, overwrite, err := copyMoveHeaders(r)
	if err != nil {
		return err
	}
	if src, dst, ok := s.plainMove(r); ok {
		return s.moveAt(w, r, src, dst, depth, overwrite)
	}

	s.lookupPair(r)
	src, sn, err := s.lookupItem("a root folder cannot be copied or moved")
	if err != nil {
		return err
	}
	if err := s.sourceChecks(r, sn, depth); err != nil {
		return err
	}
	dst, dn, dstExists, parent, name, err := s.lookupNew(dstPath, destinationParent)
	if err != nil {
		return err
	}
	if err := d.slashChecks(sn, dn, dstExists); err != nil {
		return err
	}
	if dst.isMountRoot() {
		return describe(vfs.ErrRootItem, "a root folder cannot be replaced")
	}
	if judgesTags(r) {
		// Held at a MOVE's commit by sameItem, as in delete.
		if err := s.listed(&sn); err != nil {
			return err
		}
	}
	if err := s.preconditions(r, s.path, sn, true); err != nil {
		return err
	}
	if err := s.targetChecks(r, src, dst, sn, dn, dstExists, parent.err, overwrite); err != nil {
		return err
	}
	// vfs deletes an existing destination in the transaction that puts
	// the copy or the moved item in its place: a refused or failed COPY
	// or MOVE leaves it as it was.
	fs, opts := s.h.opts.FS, s.optsFor(dst.m.root.ID)
	opts.Overwrite = dstExists
	// The conditions held for the source at its revision; the move or
	// the delete holds them at its commit too, so a revision that lands
	// in between is not moved away or deleted unseen (412).
	srcOpts := s.optsFor(src.m.root.ID)
	if conditional(r) && !sn.Dir {
		srcOpts.IfRevision = sn.RevisionID
	}
	switch {
	case move && src.m == dst.m:
		// Of the items at the paths in the move's commit, and only
		// while they are the ones judged above: by their ids, the move
		// took the item from wherever another MOVE had taken it since,
		// into the folder wherever that had gone.
		opts.IfRevision = srcOpts.IfRevision
		opts.Listing = sn.Listing != "" // read above: its tag is judged
		_, _, err = fs.MoveAt(s.ctx, src.m.root.ID, src.rel, dst.rel, opts, func(at vfs.Node, dstErr error, old *vfs.Node) error {
			if err := sameItem(sn)(at); err != nil {
				return err
			}
			if dstExists && (old == nil || old.ID != dn.ID) {
				return describe(errPrecondition, "the conditions were judged on another Destination than the one now there")
			}
			return parentConflict(dstErr, destinationParent)
		})
	case depth == "0" && sn.Dir:
		// An empty collection with the source's dead properties.
		_, err = fs.CopyEmpty(s.ctx, src.m.root.ID, sn.ID, dst.m.root.ID, parent.node.ID, name, opts)
	default:
		_, err = fs.Copy(s.ctx, src.m.root.ID, sn.ID, dst.m.root.ID, parent.node.ID, name, opts)
		if err == nil && move {
			if s.h.copiedForMove != nil {
				s.h.copiedForMove()
			}
			// The copy is in place: a client gone now (a large tree's
			// copy takes minutes, longer than many clients wait) must
			// not leave the item in both roots. The delete is one
			// short transaction, so it runs to its end regardless.
			err = fs.Delete(context.WithoutCancel(s.ctx), src.m.root.ID, sn.ID, srcOpts)
		}
	}
	if err != nil {
		return err
	}
	copyMoveDone(w, dstExists)
	return nil
}

// copyMoveDone answers a COPY or MOVE that succeeded: 204 when it
// replaced the destination, 201 when it created it.
func copyMoveDone(w http.ResponseWriter, replaced bool) {
	if replaced {
		w.WriteHeader(http.StatusNoContent)
	} else {
		w.WriteHeader(http.StatusCreated)
	}
}

// sourceChecks refuses a COPY or MOVE of sn, the item at the request's
// path, for what the paths and Depth say of it, in copyMove's order.
func (s *session) sourceChecks(r *http.Request, sn vfs.Node, depth string) error {
	// RFC 4918 9.8.3 and 9.9.2 bound Depth for a collection: COPY takes
	// 0 or infinity, MOVE infinity only. A file has nothing below it for
	// a Depth to apply to, and clients send "Depth: 0" with a file's
	// MOVE; only a COPY's Depth 1 is refused for any source.
	if move := r.Method == "MOVE"; (move && sn.Dir && depth != "infinity") || (!move && depth == "1") {
		return describe(errBadDepth, "invalid Depth for %s", r.Method)
	}
	dstPath := s.dest.path
	if dstPath == s.path {
		return errSameResource
	}
	if sn.Dir && strings.HasPrefix(dstPath, strings.TrimSuffix(s.path, "/")+"/") {
		return errInsideItself
	}
	return nil
}

// slashChecks refuses a Destination that ends in "/" where the item
// there (dn, when exists) or, with none, the source sn is a file.
func (d *destination) slashChecks(sn, dn vfs.Node, exists bool) error {
	if !d.slash {
		return nil
	}
	if exists && !dn.Dir {
		return describe(errFileAsCollection, "the Destination ends in / (a collection), and %s is a file", dn.Name)
	}
	if !exists && !sn.Dir {
		return describe(errFileAsCollection, "the Destination ends in / (a collection), and %s is a file", sn.Name)
	}
	return nil
}

// targetChecks refuses a COPY or MOVE of sn, at src, onto dn (when
// exists), at dst, after its conditions held, in copyMove's order: the
// locked extensions of each one's root's policy, the Destination's
// missing folder (parentErr), Overwrite: F, and a destination that holds
// the source.
func (s *session) targetChecks(r *http.Request, src, dst target, sn, dn vfs.Node, exists bool, parentErr error, overwrite bool) error {
	if r.Method == "MOVE" {
		if err := s.readOnly(src, sn); err != nil {
			return err
		}
	}
	if exists {
		if err := s.readOnly(dst, dn); err != nil {
			return err
		}
	}
	if parentErr != nil {
		return parentErr
	}
	if exists {
		if !overwrite {
			return errNoOverwrite
		}
		if strings.HasPrefix(s.path, strings.TrimSuffix(s.dest.path, "/")+"/") {
			return describe(errInsideItself, "the destination is a collection that holds the source")
		}
	}
	return nil
}

// plainMove reports whether a MOVE is one transaction (vfs.MoveAt): it
// has no If header (which reads the store; If-Match, If-None-Match and
// If-Unmodified-Since are judged in the commit, by moveChecks), its source
// and Destination lie below the top folder of one root, the caller may
// move the one and write the other, and its headers are well formed.
// src and dst are their targets. Otherwise copyMove looks the two up
// before the move, as fileAsCollection does the source, and refuses what
// it refuses in its order. It is decided once a request (decidePlainMove):
// fileAsCollection asks first where the path ends in "/", copyMove next.
func (s *session) plainMove(r *http.Request) (src, dst target, ok bool) {
	if !s.plain.decided {
		s.plain = s.decidePlainMove(r)
	}
	return s.plain.src, s.plain.dst, s.plain.ok
}

// plainMoved is plainMove's answer, once decided.
type plainMoved struct {
	src, dst    target
	ok, decided bool
}

// decidePlainMove is plainMove's answer, worked out.
func (s *session) decidePlainMove(r *http.Request) plainMoved {
	if s.h.plainMoveDecided != nil {
		s.h.plainMoveDecided()
	}
	no := plainMoved{decided: true}
	if r.Method != "MOVE" || r.Header.Get("If") != "" {
		return no
	}
	d := s.destination(r)
	if d.err != nil || s.permitted(s.path, changes["MOVE"]) != nil || s.permitted(d.path, share.Write) != nil {
		return no
	}
	if _, _, err := copyMoveHeaders(r); err != nil {
		return no
	}
	src, err := s.resolve(s.path)
	if err != nil || src.isMountRoot() {
		return no
	}
	dst, err := s.resolve(d.path)
	if err != nil || dst.isMountRoot() || dst.m != src.m {
		return no
	}
	return plainMoved{src: src, dst: dst, ok: true, decided: true}
}

// moveAt moves the request's item, src, to the Destination, dst, in one
// transaction that looks both up (vfs.MoveAt), where copyMove's checks,
// and fileAsCollection's of the source, run on what it finds, in the
// order copyMove runs them on its lookups: the answers are the same.
func (s *session) moveAt(w http.ResponseWriter, r *http.Request, src, dst target, depth string, overwrite bool) error {
	srcSlash := strings.HasSuffix(r.URL.EscapedPath(), "/")
	var refused error
	check := func(sn vfs.Node, dstErr error, dn *vfs.Node) error {
		refused = s.moveChecks(r, src, dst, sn, dstErr, dn, srcSlash, depth, overwrite)
		return refused
	}
	opts := s.optsFor(dst.m.root.ID)
	opts.Overwrite = overwrite
	// A collection's tag is its listing's, read in the commit only for
	// conditions that may judge it.
	opts.Listing = judgesTags(r)
	_, replaced, err := s.h.opts.FS.MoveAt(s.ctx, src.m.root.ID, src.rel, dst.rel, opts, check)
	if errors.Is(err, vfs.ErrNotExist) && err != refused {
		return vfs.ErrNotExist // lookup's answer
	}
	if err != nil {
		return err
	}
	copyMoveDone(w, replaced)
	return nil
}

// moveChecks are moveAt's refusals of the MOVE of sn, at src, to the
// Destination, dst, where dn is the item there, if any, and dstErr why
// there is no place for it.
func (s *session) moveChecks(r *http.Request, src, dst target, sn vfs.Node, dstErr error, dn *vfs.Node, srcSlash bool, depth string, overwrite bool) error {
	if srcSlash && !sn.Dir {
		return describe(vfs.ErrNotExist, "no collection of that name: %s is a file", sn.Name)
	}
	if err := s.sourceChecks(r, sn, depth); err != nil {
		return err
	}
	var parentErr error
	switch {
	case errors.Is(dstErr, vfs.ErrNotExist) || errors.Is(dstErr, vfs.ErrNotDir):
		parentErr = describe(errParentMissing, "%s does not exist", destinationParent)
	case dstErr != nil:
		return dstErr
	}
	var old vfs.Node
	if dn != nil {
		old = *dn
	}
	if err := s.dest.slashChecks(sn, old, dn != nil); err != nil {
		return err
	}
	// Judged on the item the commit moves, a folder as much as a file:
	// one that came to the path since a check is not moved unseen.
	if err := writeConditions(r, sn, true); err != nil {
		return err
	}
	return s.targetChecks(r, src, dst, sn, old, dn != nil, parentErr, overwrite)
}
