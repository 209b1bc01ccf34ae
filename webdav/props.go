package webdav

import (
	"encoding/xml"
	"errors"
	"net/http"
	"slices"
	"strings"

	"berth/account"
	"berth/httpserve"
	"berth/vfs"
)

// resource is one entry of a PROPFIND answer.
type resource struct {
	dead      map[string][]byte // prefetched dead properties, when fetched
	fetched   bool
	href      string
	n         vfs.Node
	m         *mount     // nil for the list of roots
	inherited []heldLock // deep locks of the folders above
}

// heldLock is a lock with the href of the resource it was taken on.
type heldLock struct {
	l    vfs.Lock
	root string
}

// the live properties berth computes, in allprop order. Quota properties
// (RFC 4331) are sent only when asked for by name, as that RFC says.
var liveProps = []string{"resourcetype", "displayname", "creationdate", "getlastmodified",
	"getetag", "getcontentlength", "getcontenttype", "supportedlock", "lockdiscovery"}

var quotaProps = []string{"quota-available-bytes", "quota-used-bytes"}

func isLive(n xml.Name) bool {
	if n.Space != davNS {
		return false
	}
	for _, l := range liveProps {
		if l == n.Local {
			return true
		}
	}
	for _, l := range quotaProps {
		if l == n.Local {
			return true
		}
	}
	return false
}

// maxPropfindNames bounds the properties one PROPFIND names. Each is
// answered for every resource listed, so 10,000 names (what the XML
// bounds let through) on a folder of 10,000 items made the server write a
// hundred million entries. Windows, Finder, rclone and davfs2 name ten to
// twenty; litmus at most a few dozen.
const maxPropfindNames = 256

// propfind answers PROPFIND with Depth 0, 1 or (when configured) infinity.
func (s *session) propfind(w http.ResponseWriter, r *http.Request) error {
	depth := 0
	switch d := r.Header.Get("Depth"); {
	case d == "0":
	case d == "1":
		depth = 1
	case d == "" || strings.EqualFold(d, "infinity"):
		if !s.h.opts.InfiniteDepth {
			return errFiniteDepth
		}
		depth = -1
	default:
		return errBadDepth
	}
	body, err := s.h.xml.parse(s.caller.Person.ID, r.Body)
	if err != nil {
		return err
	}
	mode, names, include := "allprop", []xml.Name(nil), []string(nil)
	if body != nil {
		if !body.is(davNS, "propfind") {
			return describe(errBadBody, "the body is not a DAV:propfind")
		}
		mode = ""
		for _, c := range body.children() {
			switch {
			case c.is(davNS, "allprop"), c.is(davNS, "propname"):
				mode = c.name.Local
			case c.is(davNS, "prop"):
				mode = "prop"
				for _, p := range c.children() {
					names = append(names, p.name)
				}
			case c.is(davNS, "include"):
				// What allprop leaves out and a client may name here
				// (RFC 4918 9.1): the quota properties. The rest is
				// in allprop already, or unknown.
				for _, p := range c.children() {
					if p.name.Space == davNS && slices.Contains(quotaProps, p.name.Local) && !slices.Contains(include, p.name.Local) {
						include = append(include, p.name.Local)
					}
				}
			}
		}
		if mode == "" {
			return describe(errBadBody, "DAV:propfind needs prop, allprop or propname")
		}
		if len(names) > maxPropfindNames {
			return describe(errBadBody, "a PROPFIND may name at most %d properties", maxPropfindNames)
		}
	}

	t, n, exists, err := s.lookup(s.path)
	if err != nil && !errors.Is(err, vfs.ErrNotExist) {
		return err
	}
	if !exists {
		return vfs.ErrNotExist
	}
	if err := s.checkIf(r, s.path); err != nil {
		return err
	}
	pw := &propWriter{s: s, mode: mode, names: names, include: include, quota: map[uint64]quotaFigures{}}
	s.wantTags = pw.sendsTags()
	if s.wantTags || matchesTags(r) {
		if err := s.listed(&n); err != nil {
			return err
		}
	}
	// RFC 9110 13.1.1 and 13.1.2: an If-Match that fails, or an
	// If-None-Match that holds on a method other than GET and HEAD, is
	// 412, as Apache's mod_dav answers a PROPFIND; a client that lists
	// a collection only while it is at the ETag it knows relies on it.
	// Lists are read as a GET reads them (a tag that does not parse
	// ends the list unmatched), since nothing is written.
	if err := checkMatch(r, n, true); err != nil {
		return err
	}
	inherited, err := s.inheritedLocks(t, n)
	if err != nil {
		return err
	}
	pw.dead = pw.needDead()
	s.wantDead = func() bool { return pw.dead }
	w.Header().Set("Content-Type", "application/xml; charset=utf-8")
	w.WriteHeader(http.StatusMultiStatus)
	// Over HTTP/1 the answer's TLS records go out gathered, as a
	// download's do: 7 MB of allprop was some 550 write calls, and the
	// in-process benchmark's CPU per allprop fell by a sixth.
	release := httpserve.Hold(w, r)
	defer func() { _ = release() }()
	pw.out = newAnswerWriter(w)
	defer pw.out.close(nil) // a panic midway: nothing may write to w after the handler
	pw.buf = append(pw.out.take(), xml.Header+`<D:multistatus xmlns:D="DAV:">`...)
	err = s.walk(&resource{href: s.h.href(s.path, n.Dir), n: n, m: t.m, inherited: inherited}, depth, pw.write)
	if err != nil {
		pw.out.close(nil)
		// The status is sent; a broken stream is all that is left to say.
		s.h.log.Error("webdav: PROPFIND failed midway", "path", s.path, "error", err)
		panic(http.ErrAbortHandler)
	}
	// A client that stopped reading gets nothing more, and there is no
	// answer left to give it instead.
	_ = pw.out.close(append(pw.buf, `</D:multistatus>`...))
	return nil
}

// walk calls fn for res and, to depth (-1: all), for what is below it.
// Resources go by pointer: a vfs.Node is some hundreds of bytes, and a
// 10,000-entry listing copied each several times per property.
func (s *session) walk(res *resource, depth int, fn func(*resource) error) error {
	if err := fn(res); err != nil {
		return err
	}
	if depth == 0 || !res.n.Dir {
		return nil
	}
	if err := s.ctx.Err(); err != nil {
		return err
	}
	if res.m == nil {
		for i := range s.mounts {
			m := &s.mounts[i]
			n, err := s.node(target{m: m, rel: "/"})
			if err != nil {
				return err
			}
			if s.wantTags {
				if err := s.listed(&n); err != nil {
					return err
				}
			}
			kid := resource{href: s.h.href("/"+m.name, true), n: n, m: m}
			if err := s.walk(&kid, depth-1, fn); err != nil {
				return err
			}
		}
		return nil
	}
	inherited := res.inherited
	for _, l := range res.n.Locks {
		if l.Deep {
			inherited = append(inherited[:len(inherited):len(inherited)], heldLock{l: l, root: res.href})
		}
	}
	base := strings.TrimSuffix(res.href, "/") + "/"
	// The children are written as they are read, with their dead
	// properties read along (one ordered scan per batch of them), so a
	// listing holds one batch whatever the folder's size.
	dead := s.wantDead != nil && s.wantDead()
	opts := vfs.ListOptions{Props: dead, Hashes: s.wantTags}
	return s.h.opts.FS.ListEach(s.ctx, res.m.root.ID, res.n.ID, opts, func(l *vfs.Listing) error {
		var kid resource
		for c, err := range l.Children() {
			if err != nil {
				return err
			}
			href := base + escapeSegment(c.Name)
			if c.Dir {
				href += "/"
			}
			kid = resource{href: href, n: c.Node, m: res.m, inherited: inherited, dead: c.Props, fetched: dead}
			if err := s.walk(&kid, depth-1, fn); err != nil {
				return err
			}
		}
		return nil
	})
}

// inheritedLocks returns the deep locks of the folders above n, in one
// read of them (vfs.DeepLocksAbove): a Stat of each folder above, each
// resolving its path, cost a PROPFIND the square of its depth.
func (s *session) inheritedLocks(t target, n vfs.Node) ([]heldLock, error) {
	if t.m == nil || n.ParentID == 0 {
		return nil, nil
	}
	above, err := s.h.opts.FS.DeepLocksAbove(s.ctx, t.m.root.ID, n.ID)
	if err != nil {
		return nil, err
	}
	var out []heldLock
	for _, p := range above {
		for _, l := range p.Locks {
			if l.Deep {
				out = append(out, heldLock{l: l, root: s.h.href(davPathOf(t.m, p), true)})
			}
		}
	}
	return out, nil
}

// proppatch sets and removes dead properties, all or nothing. Live
// properties are protected (403, the others 424).
func (s *session) proppatch(w http.ResponseWriter, r *http.Request) error {
	t, n, exists, err := s.lookup(s.path)
	if err != nil && !errors.Is(err, vfs.ErrNotExist) {
		return err
	}
	if !exists {
		return vfs.ErrNotExist
	}
	if t.top() {
		return describe(errRootsList, "the list of roots has no properties")
	}
	if err := s.preconditions(r, s.path, n, exists); err != nil {
		return err
	}
	body, err := s.h.xml.parse(s.caller.Person.ID, r.Body)
	if err != nil {
		return err
	}
	if body == nil || !body.is(davNS, "propertyupdate") {
		return describe(errBadBody, "the body is not a DAV:propertyupdate")
	}
	type op struct {
		name   xml.Name
		value  []byte
		remove bool
	}
	var ops []op
	bodyLang := langOf(body, "")
	for _, c := range body.children() {
		remove := c.is(davNS, "remove")
		if !remove && !c.is(davNS, "set") {
			continue
		}
		for _, p := range c.children() {
			if !p.is(davNS, "prop") {
				continue
			}
			lang := langOf(p, langOf(c, bodyLang))
			for _, prop := range p.children() {
				ops = append(ops, op{name: prop.name, value: deadValue(prop, langOf(prop, lang)), remove: remove})
			}
		}
	}
	if len(ops) == 0 {
		// A 207 would hold a response with neither status nor
		// propstat, which DAV:response does not allow.
		return describe(errBadBody, "the PROPPATCH sets or removes no property")
	}
	protected := false
	for _, o := range ops {
		protected = protected || isLive(o.name)
	}
	if !protected {
		// Later operations win: fold them into one set and one remove list.
		set := map[string][]byte{}
		var remove []string
		for _, o := range ops {
			k := propKey(o.name)
			if o.remove {
				delete(set, k)
				remove = append(remove, k)
			} else {
				set[k] = o.value
			}
		}
		if err := s.h.opts.FS.PatchProps(s.ctx, t.m.root.ID, n.ID, set, remove, s.optsFor(t.m.root.ID)); err != nil {
			return err
		}
	}
	w.Header().Set("Content-Type", "application/xml; charset=utf-8")
	w.WriteHeader(http.StatusMultiStatus)
	b := []byte(xml.Header + `<D:multistatus xmlns:D="DAV:"><D:response><D:href>`)
	b = appendEscaped(b, s.h.href(s.path, n.Dir))
	b = append(b, "</D:href>"...)
	for _, o := range ops {
		st := "200 OK"
		switch {
		case protected && isLive(o.name):
			st = "403 Forbidden"
		case protected:
			st = "424 Failed Dependency"
		}
		b = append(b, "<D:propstat><D:prop>"...)
		b = appendEmpty(b, o.name)
		b = append(b, "</D:prop><D:status>HTTP/1.1 "+st+"</D:status></D:propstat>"...)
	}
	b = append(b, "</D:response></D:multistatus>"...)
	// A client that stopped reading gets nothing more, and there is no
	// answer left to give it instead.
	_, _ = w.Write(b)
	return nil
}

// escapeSegment escapes one path segment for an href.
func escapeSegment(name string) string {
	return strings.TrimPrefix((&urlPath{name}).escaped(), "/")
}

// writeActiveLock writes a DAV:activelock element (a LOCK's answer).
func writeActiveLock(b *strings.Builder, h heldLock) { b.Write(appendActiveLock(nil, h)) }

// quotaFigures are the RFC 4331 figures of a root; available is -1 when
// nothing bounds it that berth can tell.
type quotaFigures struct {
	used, available int64
}

// quotaFigures computes the RFC 4331 figures of root for the session's
// person. Used is what the person's own quota counts: every root of
// theirs, live or deleted until purged, from the ledger. Available is the least of what each quota of
// the session's writes leaves (the person's, their organization's and
// every ancestor's) and the store's free space above its reserve, the
// latter coarsened by vfs.FS.StoreRoom (chunks are stored once across
// tenants, so an exact figure would tell whether someone else had
// stored a file: see docs/webdav.md).
func (s *session) quotaFigures(root uint64) (quotaFigures, error) {
	fs := s.h.opts.FS
	u, err := fs.TallyUsage(s.ctx, account.TallyPerson(s.caller.Person.ID))
	if err != nil {
		return quotaFigures{}, err
	}
	q := quotaFigures{used: u.PhysicalSize, available: -1}
	left, bound, err := fs.QuotaLeft(s.ctx, root, s.optsFor(root))
	if err != nil {
		return quotaFigures{}, err
	}
	if bound {
		q.available = left
	}
	if room, ok := fs.StoreRoom(); ok && (q.available < 0 || room < q.available) {
		q.available = room
	}
	return q, nil
}
