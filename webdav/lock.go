package webdav

import (
	"encoding/xml"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"berth/vfs"
)

// lock takes a lock (exclusive or shared, depth 0 or infinity) or, without
// a body, refreshes the one the If header names. Locking a missing
// resource creates it empty (RFC 4918 7.3), which is how Windows and
// Office create files; a refused lock creates nothing.
func (s *session) lock(w http.ResponseWriter, r *http.Request) error {
	if at := s.targetAt(s.path); !s.policyOf(at).UserLockFiles && s.binds(at) {
		return errLockingDisabled
	}
	timeout := lockTimeout(r.Header.Get("Timeout"))
	body, err := s.h.xml.parse(s.caller.Person.ID, r.Body)
	if err != nil {
		return err
	}
	t, n, exists, err := s.lookup(s.path)
	if errors.Is(err, errNoRoot) {
		return noRoot(s.path)
	}
	if err != nil {
		return err
	}
	if t.top() {
		return describe(errRootsList, "the list of roots cannot be locked")
	}
	if body == nil {
		return s.refresh(w, r, timeout)
	}
	if !body.is(davNS, "lockinfo") {
		return describe(errBadBody, "the body is not a DAV:lockinfo")
	}
	req := vfs.LockRequest{Duration: timeout, Deep: true}
	write := false
	for _, c := range body.children() {
		switch {
		case c.is(davNS, "lockscope"):
			for _, sc := range c.children() {
				req.Shared = sc.is(davNS, "shared")
			}
		case c.is(davNS, "locktype"):
			for _, lt := range c.children() {
				write = write || lt.is(davNS, "write")
			}
		case c.is(davNS, "owner"):
			req.Owner = string(innerXML(c))
		}
	}
	if !write {
		return errNotWriteLock
	}
	switch d := r.Header.Get("Depth"); {
	case d == "0":
		req.Deep = false
	case d == "" || strings.EqualFold(d, "infinity"):
	default:
		return describe(errBadDepth, "LOCK Depth must be 0 or infinity")
	}
	if err := s.preconditions(r, s.path, n, exists); err != nil {
		return err
	}
	var lk vfs.Lock
	created := false
	if !exists {
		// The empty file and its lock are one transaction: a refused
		// lock leaves no file behind, and a file someone else created
		// meanwhile is locked below, never emptied.
		parent, name, err := s.parentOrConflict(t, "the parent collection")
		if err != nil {
			return err
		}
		req.Holder, req.TokenRequired = s.opts.Principal, true
		n, lk, err = s.h.opts.FS.CreateLocked(s.ctx, t.m.root.ID, parent.ID, name, req, s.optsFor(t.m.root.ID))
		switch {
		case err == nil:
			created = true
		case !errors.Is(err, vfs.ErrNameConflict):
			return err
		}
	}
	if !created {
		if lk, n, err = s.takeLock(s.path, req); err != nil {
			return err
		}
	}
	w.Header().Set("Lock-Token", "<"+lk.Token+">")
	st := http.StatusOK
	if created {
		st = http.StatusCreated
	}
	writeLockBody(w, st, heldLock{l: lk, root: s.h.href(s.path, n.Dir)})
	return nil
}

// refresh extends the lock whose token the If header names. Only the
// person who took a lock may refresh it (RFC 4918 6.4), as only they may
// write through it or remove it.
func (s *session) refresh(w http.ResponseWriter, r *http.Request, timeout time.Duration) error {
	ih := r.Header.Get("If")
	if ih == "" {
		return describe(errNoLockToken, "a lock refresh needs the lock token in an If header")
	}
	lists, err := parseIf(ih)
	if err != nil {
		return err
	}
	t, _ := s.resolve(s.path)
	foreign := false
	for _, tok := range submittedTokens(lists) {
		n, lk, err := s.scopeLock(s.path, tok)
		if err != nil {
			continue
		}
		if lk.Holder != s.opts.Principal {
			foreign = true
			continue
		}
		lk, err = s.h.opts.FS.RefreshLock(s.ctx, t.m.root.ID, n.ID, tok, timeout)
		if err != nil {
			return err
		}
		writeLockBody(w, http.StatusOK, heldLock{l: lk, root: s.h.href(davPathOf(t.m, n), n.Dir)})
		return nil
	}
	if foreign {
		return errForeignLock
	}
	return describe(errIfFailed, "no lock of the If header covers this resource")
}

// unlock removes the lock named by Lock-Token from the resource or the
// folder above it that holds it. Only the person who took it may.
func (s *session) unlock(w http.ResponseWriter, r *http.Request) error {
	tok := strings.TrimSpace(r.Header.Get("Lock-Token"))
	if len(tok) < 3 || tok[0] != '<' || tok[len(tok)-1] != '>' {
		return errNoLockToken
	}
	tok = tok[1 : len(tok)-1]
	t, n, exists, err := s.lookup(s.path)
	if err != nil && !errors.Is(err, vfs.ErrNotExist) {
		return err
	}
	if !exists || t.top() {
		return vfs.ErrNotExist
	}
	// RFC 9110 13.1: If-Match and the rest fail any method, as the If
	// header does (RFC 4918 10.4.1); judged as for a write, as REST
	// judges its unlock.
	if err := s.preconditions(r, s.path, n, true); err != nil {
		return err
	}
	n, lk, err := s.scopeLock(s.path, tok)
	if err != nil {
		return errLockTokenMismatch
	}
	if lk.Holder != s.opts.Principal {
		return errForeignLock
	}
	if err := s.h.opts.FS.Unlock(s.ctx, t.m.root.ID, n.ID, tok); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// lockTimeout reads the Timeout header: the first value berth can honour,
// bounded by maxLockTimeout ("Infinite" gets the bound too). The seconds
// are compared before they become a Duration: N seconds overflow it for N
// over some 9.2e9 and wrapped to a negative duration, a lock that never
// expires; a number too large even for 64 bits asks for the bound too.
func lockTimeout(h string) time.Duration {
	for v := range strings.SplitSeq(h, ",") {
		v = strings.TrimSpace(v)
		if strings.EqualFold(v, "Infinite") {
			return maxLockTimeout
		}
		if secs, ok := strings.CutPrefix(v, "Second-"); ok {
			n, err := strconv.ParseUint(secs, 10, 64)
			switch {
			case errors.Is(err, strconv.ErrRange), err == nil && n > uint64(maxLockTimeout/time.Second):
				return maxLockTimeout
			case err == nil && n > 0:
				return time.Duration(n) * time.Second
			}
		}
	}
	return defaultLockTimeout
}

func writeLockBody(w http.ResponseWriter, status int, h heldLock) {
	var b strings.Builder
	b.WriteString(xml.Header + `<D:prop xmlns:D="DAV:"><D:lockdiscovery>`)
	writeActiveLock(&b, h)
	b.WriteString("</D:lockdiscovery></D:prop>")
	w.Header().Set("Content-Type", "application/xml; charset=utf-8")
	w.WriteHeader(status)
	w.Write([]byte(b.String()))
}

// findLock finds the lock token on the resource at dav path p or a folder
// above it.
func (s *session) findLock(p, token string) (vfs.Node, vfs.Lock, error) {
	t, err := s.resolve(p)
	if err != nil {
		return vfs.Node{}, vfs.Lock{}, vfs.ErrNoSuchLock
	}
	if t.top() {
		return vfs.Node{}, vfs.Lock{}, vfs.ErrNoSuchLock
	}
	// The resource may not exist (a lock on its folder still covers the name).
	return s.h.opts.FS.FindLockAt(s.ctx, t.m.root.ID, t.rel, token)
}

// scopeLock is findLock for a lock whose scope holds the resource at dav
// path p, which an UNLOCK or a refresh sent to p must name (RFC 4918
// 9.11): p's own lock, or a depth-infinity lock of a folder above it. A
// depth-0 lock on a folder does not hold what the folder holds.
func (s *session) scopeLock(p, token string) (vfs.Node, vfs.Lock, error) {
	n, lk, err := s.findLock(p, token)
	if err != nil || lk.Deep {
		return n, lk, err
	}
	if t, err := s.resolve(p); err != nil || t.top() || n.Path != t.rel {
		return vfs.Node{}, vfs.Lock{}, vfs.ErrNoSuchLock
	}
	return n, lk, nil
}

// takeLock locks the resource at dav path p for the session's person with
// a token-required (WebDAV) lock.
func (s *session) takeLock(p string, req vfs.LockRequest) (vfs.Lock, vfs.Node, error) {
	t, err := s.resolve(p)
	if err != nil {
		return vfs.Lock{}, vfs.Node{}, vfs.ErrNotExist
	}
	if t.top() {
		return vfs.Lock{}, vfs.Node{}, vfs.ErrRootItem
	}
	n, err := s.node(t)
	if err != nil {
		return vfs.Lock{}, n, err
	}
	req.Holder = s.opts.Principal
	req.TokenRequired = true
	req.Deep = req.Deep && n.Dir
	lk, err := s.h.opts.FS.Lock(s.ctx, t.m.root.ID, n.ID, req)
	return lk, n, err
}

// parentOf is the folder path of a root-relative path ("/a/b" -> "/a").
func parentOf(rel string) string {
	i := strings.LastIndexByte(strings.TrimSuffix(rel, "/"), '/')
	if i <= 0 {
		return "/"
	}
	return rel[:i]
}
