package webdav

import (
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
// the same reason.
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

// copyMove handles COPY and MOVE with Destination, Overwrite and Depth.
func (s *session) copyMove(w http.ResponseWriter, r *http.Request) error {
	move := r.Method == "MOVE"
	dh := r.Header.Get("Destination")
	if dh == "" {
		return describe(errBadDestination, "Destination header required")
	}
	u, err := url.Parse(dh)
	if err != nil {
		return errBadDestination
	}
	if u.Host != "" && !sameAuthority(u.Host, r.Host) {
		return errOtherServer
	}
	dstPath, err := s.h.davPath(u.EscapedPath())
	if err != nil {
		return describe(errBadDestination, "Destination: %v", err)
	}
	if err := s.permitted(dstPath, share.Write); err != nil {
		return err
	}
	depth := r.Header.Get("Depth")
	switch {
	case depth == "" || strings.EqualFold(depth, "infinity"):
		depth = "infinity"
	case depth == "0" || depth == "1":
	default:
		return errBadDepth
	}
	overwrite := true
	switch r.Header.Get("Overwrite") {
	case "", "T", "t":
	case "F", "f":
		overwrite = false
	default:
		return errBadOverwrite
	}

	s.lookupPair(r, dstPath)
	src, sn, err := s.lookupItem("a root folder cannot be copied or moved")
	if err != nil {
		return err
	}
	// RFC 4918 9.8.3 and 9.9.2 bound Depth for a collection: COPY takes
	// 0 or infinity, MOVE infinity only. A file has nothing below it for
	// a Depth to apply to, and clients send "Depth: 0" with a file's
	// MOVE; only a COPY's Depth 1 is refused for any source.
	if (move && sn.Dir && depth != "infinity") || (!move && depth == "1") {
		return describe(errBadDepth, "invalid Depth for %s", r.Method)
	}
	if dstPath == s.path {
		return errSameResource
	}
	if sn.Dir && strings.HasPrefix(dstPath, strings.TrimSuffix(s.path, "/")+"/") {
		return errInsideItself
	}
	dst, dn, dstExists, parent, name, err := s.lookupNew(dstPath, destinationParent)
	if err != nil {
		return err
	}
	if dstExists && !dn.Dir && strings.HasSuffix(u.EscapedPath(), "/") {
		return describe(errFileAsCollection, "the Destination ends in / (a collection), and %s is a file", dn.Name)
	}
	if !dstExists && !sn.Dir && strings.HasSuffix(u.EscapedPath(), "/") {
		return describe(errFileAsCollection, "the Destination ends in / (a collection), and %s is a file", sn.Name)
	}
	if dst.isMountRoot() {
		return describe(vfs.ErrRootItem, "a root folder cannot be replaced")
	}
	if err := s.preconditions(r, s.path, sn, true); err != nil {
		return err
	}
	if move {
		if err := s.readOnly(sn); err != nil {
			return err
		}
	}
	if dstExists {
		if err := s.readOnly(dn); err != nil {
			return err
		}
	}
	if parent.err != nil {
		return parent.err
	}
	if dstExists {
		if !overwrite {
			return errNoOverwrite
		}
		if src.m == dst.m && strings.HasPrefix(s.path, strings.TrimSuffix(dstPath, "/")+"/") {
			return describe(errInsideItself, "the destination is a collection that holds the source")
		}
	}
	// vfs deletes an existing destination in the transaction that puts
	// the copy or the moved item in its place: a refused or failed COPY
	// or MOVE leaves it as it was.
	fs, opts := s.h.opts.FS, s.optsFor(dst.m.root.ID)
	opts.Overwrite = dstExists
	switch {
	case move && src.m == dst.m:
		_, err = fs.Move(s.ctx, src.m.root.ID, sn.ID, parent.node.ID, name, opts)
	case depth == "0" && sn.Dir:
		// An empty collection with the source's dead properties.
		_, err = fs.CopyEmpty(s.ctx, src.m.root.ID, sn.ID, dst.m.root.ID, parent.node.ID, name, opts)
	default:
		_, err = fs.Copy(s.ctx, src.m.root.ID, sn.ID, dst.m.root.ID, parent.node.ID, name, opts)
		if err == nil && move {
			err = fs.Delete(s.ctx, src.m.root.ID, sn.ID, s.optsFor(src.m.root.ID))
		}
	}
	if err != nil {
		return err
	}
	if dstExists {
		w.WriteHeader(http.StatusNoContent)
	} else {
		w.WriteHeader(http.StatusCreated)
	}
	return nil
}
