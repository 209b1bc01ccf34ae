package webdav

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	xwebdav "golang.org/x/net/webdav"

	"berth/vfs"
)

// lockSystem is x/net/webdav's LockSystem over vfs locks, the one lock
// table REST uses too. Its methods take no context, so it is made per
// session. berth's own LOCK, UNLOCK and write handlers call vfs directly;
// this type serves the library's code paths.
type lockSystem struct{ s *session }

var _ xwebdav.LockSystem = (*lockSystem)(nil)

// Confirm checks that every state token of conditions names a live lock
// covering name0 or name1, and records the tokens as presented; vfs
// refuses the write itself if a lock it needs is not among them.
func (l *lockSystem) Confirm(now time.Time, name0, name1 string, conditions ...xwebdav.Condition) (func(), error) {
	for _, c := range conditions {
		if c.Token == "" || c.Not {
			continue
		}
		ok := false
		for _, name := range []string{name0, name1} {
			if name == "" {
				continue
			}
			if _, _, err := l.s.findLock(name, c.Token); err == nil {
				ok = true
			}
		}
		if !ok {
			return nil, xwebdav.ErrConfirmationFailed
		}
		l.s.opts.LockTokens = append(l.s.opts.LockTokens, c.Token)
	}
	return func() {}, nil
}

// Create takes an exclusive write lock on an existing resource.
func (l *lockSystem) Create(now time.Time, d xwebdav.LockDetails) (string, error) {
	lk, _, err := l.s.takeLock(d.Root, vfs.LockRequest{
		Owner: d.OwnerXML, Duration: d.Duration, Deep: !d.ZeroDepth,
	})
	if err != nil {
		return "", osErr("lock", d.Root, err)
	}
	return lk.Token, nil
}

// Refresh extends a lock found on the request's resource or above it.
func (l *lockSystem) Refresh(now time.Time, token string, d time.Duration) (xwebdav.LockDetails, error) {
	n, lk, err := l.s.findLock(l.s.path, token)
	if err != nil {
		return xwebdav.LockDetails{}, osErr("refresh", l.s.path, err)
	}
	t, _ := l.s.resolve(l.s.path)
	lk, err = l.s.h.opts.FS.RefreshLock(l.s.ctx, t.m.root.ID, n.ID, token, d)
	if err != nil {
		return xwebdav.LockDetails{}, osErr("refresh", l.s.path, err)
	}
	return xwebdav.LockDetails{Root: davPathOf(t.m, n), Duration: d, OwnerXML: lk.Owner, ZeroDepth: !lk.Deep}, nil
}

// Unlock removes a lock found on the request's resource or above it.
func (l *lockSystem) Unlock(now time.Time, token string) error {
	n, _, err := l.s.findLock(l.s.path, token)
	if err != nil {
		return osErr("unlock", l.s.path, err)
	}
	t, _ := l.s.resolve(l.s.path)
	return osErr("unlock", l.s.path, l.s.h.opts.FS.Unlock(l.s.ctx, t.m.root.ID, n.ID, token))
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
	rel := t.rel
	for {
		n, err := s.lookupRel(t.m.root.ID, rel)
		if err == nil {
			return s.h.opts.FS.FindLock(s.ctx, t.m.root.ID, n.ID, token)
		}
		if !errors.Is(err, vfs.ErrNotExist) || rel == "/" {
			return vfs.Node{}, vfs.Lock{}, err
		}
		rel = parentOf(rel)
	}
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

// checkIf evaluates the request's If header (RFC 4918 10.4) against the
// resource at dav path p: it holds when any one of its lists holds. The
// tokens the header presents become the session's lock tokens, so vfs lets
// the write through the locks they name. A failed header is 412; a
// malformed one 400.
func (s *session) checkIf(r *http.Request, p string) (int, error) {
	h := r.Header.Get("If")
	if h == "" {
		return 0, nil
	}
	lists, err := parseIf(h)
	if err != nil {
		return describe(http.StatusBadRequest, "%v", err)
	}
	s.opts.LockTokens = append(s.opts.LockTokens, submittedTokens(lists)...)
	for _, l := range lists {
		res := p
		if l.resource != "" {
			u, err := url.Parse(l.resource)
			if err != nil {
				return describe(http.StatusBadRequest, "malformed resource tag in If header")
			}
			if res, err = s.h.davPath(u.EscapedPath()); errors.Is(err, errPathTooDeep) {
				return describe(http.StatusBadRequest, "a resource tag in the If header: %v", err)
			} else if err != nil {
				continue // a resource not ours is never in the state the list names
			}
		}
		if s.listHolds(res, l.conds) {
			return 0, nil
		}
	}
	return describe(http.StatusPreconditionFailed, "the If header's conditions do not hold")
}

func (s *session) listHolds(p string, conds []ifCond) bool {
	var etag string
	if t, err := s.resolve(p); err == nil {
		if n, err := s.node(t); err == nil {
			etag = fileInfoETag(n)
		}
	}
	for _, c := range conds {
		var holds bool
		if c.token != "" {
			_, _, err := s.findLock(p, c.token)
			holds = err == nil
		} else {
			holds = etag != "" && etagMatch(c.etag, etag, false)
		}
		if holds == c.not {
			return false
		}
	}
	return true
}

// fileInfoETag is n's entity tag; the list of roots (no node) has a fixed one.
func fileInfoETag(n vfs.Node) string {
	if n.ID == 0 {
		return `"top"`
	}
	return n.ETag()
}

// checkMatch applies If-Match, If-Unmodified-Since and If-None-Match
// (RFC 9110 13.1, in the order of 13.2.2) to a resource that exists (n,
// ok) or not.
func checkMatch(r *http.Request, n vfs.Node, exists bool) (int, error) {
	etag := ""
	if exists {
		etag = fileInfoETag(n)
	}
	if im := r.Header.Get("If-Match"); im != "" {
		if !exists || !etagListHas(im, etag, false) {
			return describe(http.StatusPreconditionFailed, "If-Match does not hold")
		}
	} else if ius := r.Header.Get("If-Unmodified-Since"); ius != "" && exists && !n.Modified.IsZero() {
		// Ignored without a modification date or with a value that is
		// no date (13.1.4); dates have whole seconds.
		if since, err := http.ParseTime(ius); err == nil && n.Modified.Truncate(time.Second).After(since) {
			return describe(http.StatusPreconditionFailed, "the resource was modified after If-Unmodified-Since")
		}
	}
	if inm := r.Header.Get("If-None-Match"); inm != "" {
		if exists && etagListHas(inm, etag, true) {
			return describe(http.StatusPreconditionFailed, "If-None-Match does not hold")
		}
	}
	return 0, nil
}

// etagListHas reports whether a header's list of entity tags, or "*",
// matches etag.
func etagListHas(list, etag string, weak bool) bool {
	for t := range strings.SplitSeq(list, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || etagMatch(t, etag, weak) {
			return true
		}
	}
	return false
}

// parentOf is the folder path of a root-relative path ("/a/b" -> "/a").
func parentOf(rel string) string {
	i := strings.LastIndexByte(strings.TrimSuffix(rel, "/"), '/')
	if i <= 0 {
		return "/"
	}
	return rel[:i]
}
