package webdav

import (
	"bufio"
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

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
	body, err := parseXML(r.Body)
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
	inherited, err := s.inheritedLocks(t, n)
	if err != nil {
		return err
	}
	pw := &propWriter{s: s, mode: mode, names: names, include: include, quota: map[uint64]quotaFigures{}}
	s.wantDead = pw.needDead
	w.Header().Set("Content-Type", "application/xml; charset=utf-8")
	w.WriteHeader(http.StatusMultiStatus)
	pw.b = bufio.NewWriterSize(w, 64<<10)
	pw.b.WriteString(xml.Header + `<D:multistatus xmlns:D="DAV:">`)
	err = s.walk(&resource{href: s.h.href(s.path, n.Dir), n: n, m: t.m, inherited: inherited}, depth, pw.write)
	if err != nil {
		// The status is sent; a broken stream is all that is left to say.
		s.h.log.Error("webdav: PROPFIND failed midway", "path", s.path, "error", err)
		panic(http.ErrAbortHandler)
	}
	pw.b.WriteString(`</D:multistatus>`)
	flushAnswer(pw.b)
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
	opts := vfs.ListOptions{Props: dead}
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

// inheritedLocks returns the deep locks of the folders above n.
func (s *session) inheritedLocks(t target, n vfs.Node) ([]heldLock, error) {
	if t.m == nil {
		return nil, nil
	}
	var out []heldLock
	for id := n.ParentID; id != 0; {
		p, err := s.h.opts.FS.Stat(s.ctx, t.m.root.ID, id)
		if err != nil {
			return nil, err
		}
		for _, l := range p.Locks {
			if l.Deep {
				out = append(out, heldLock{l: l, root: s.h.href(davPathOf(t.m, p), true)})
			}
		}
		id = p.ParentID
	}
	return out, nil
}

// propWriter writes one response element per resource.
type propWriter struct {
	s     *session
	b     *bufio.Writer
	mode  string
	names []xml.Name
	// include are the live properties beyond allprop's that an allprop
	// asked for in DAV:include.
	include []string
	quota   map[uint64]quotaFigures // by root, computed once per request
	tmp     []byte                  // scratch for formatting, reused from entry to entry
}

// needDead reports whether the request asks for dead properties.
func (pw *propWriter) needDead() bool {
	if pw.mode != "prop" {
		return true
	}
	for _, n := range pw.names {
		if !isLive(n) {
			return true
		}
	}
	return false
}

func (pw *propWriter) write(res *resource) error {
	b := pw.b
	b.WriteString("<D:response><D:href>")
	b.WriteString(escape(res.href))
	b.WriteString("</D:href>")
	var dead map[string][]byte
	dead = res.dead
	if pw.needDead() && res.m != nil && !res.fetched {
		var err error
		if dead, err = pw.s.h.opts.FS.Props(pw.s.ctx, res.m.root.ID, res.n.ID); err != nil {
			return err
		}
	}
	switch pw.mode {
	case "propname":
		b.WriteString("<D:propstat><D:prop>")
		for _, l := range liveProps {
			if pw.live(res, l, false) {
				writeEmptyLive(b, l)
			}
		}
		for k := range dead {
			writeEmpty(b, propName(k))
		}
		b.WriteString("</D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat>")
	case "allprop":
		b.WriteString("<D:propstat><D:prop>")
		for _, l := range liveProps {
			pw.live(res, l, true)
		}
		for _, l := range pw.include {
			pw.live(res, l, true)
		}
		for k, v := range dead {
			writeProp(b, propName(k), v)
		}
		b.WriteString("</D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat>")
	default:
		var missing []xml.Name
		b.WriteString("<D:propstat><D:prop>")
		for _, n := range pw.names {
			if n.Space == davNS && isLive(n) && pw.live(res, n.Local, true) {
				continue
			}
			if v, ok := dead[propKey(n)]; ok {
				writeProp(b, n, v)
				continue
			}
			missing = append(missing, n)
		}
		b.WriteString("</D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat>")
		if len(missing) > 0 {
			b.WriteString("<D:propstat><D:prop>")
			for _, n := range missing {
				writeEmpty(b, n)
			}
			b.WriteString("</D:prop><D:status>HTTP/1.1 404 Not Found</D:status></D:propstat>")
		}
	}
	b.WriteString("</D:response>")
	return nil
}

// live writes the live property name of res when it has one (and write is
// set) and reports whether it has.
func (pw *propWriter) live(res *resource, name string, write bool) bool {
	b, n := pw.b, &res.n
	var v string
	switch name {
	case "resourcetype":
		if n.Dir {
			v = "<D:collection/>"
		}
	case "displayname":
		if res.m == nil {
			return false
		}
		v = escape(n.Name)
	case "creationdate":
		if n.Created.IsZero() {
			return false
		}
		// Dates are formatted into the writer's scratch buffer: a
		// Format per entry was a tenth of a large PROPFIND's time.
		pw.tmp = n.Created.UTC().AppendFormat(pw.tmp[:0], time.RFC3339)
		return pw.element(name, pw.tmp, write)
	case "getlastmodified":
		if n.Modified.IsZero() {
			return false
		}
		pw.tmp = n.Modified.UTC().AppendFormat(pw.tmp[:0], http.TimeFormat)
		return pw.element(name, pw.tmp, write)
	case "getetag":
		// Quotes, letters, digits and '-': nothing that element text
		// must escape (escape would copy it for its quotes).
		v = fileInfoETag(*n)
	case "getcontentlength":
		if n.Dir {
			return false
		}
		v = strconv.FormatInt(n.Size, 10)
	case "getcontenttype":
		if n.Dir {
			return false
		}
		v = escape(httpserve.ContentType(n.Name))
	case "supportedlock":
		if res.m == nil {
			return false
		}
		v = "<D:lockentry><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockentry>" +
			"<D:lockentry><D:lockscope><D:shared/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockentry>"
	case "lockdiscovery":
		if res.m == nil {
			return false
		}
		var sb strings.Builder
		for _, h := range res.inherited {
			writeActiveLock(&sb, h)
		}
		for _, l := range n.Locks {
			writeActiveLock(&sb, heldLock{l: l, root: res.href})
		}
		v = sb.String()
	case "quota-used-bytes", "quota-available-bytes":
		if res.m == nil || !n.Dir {
			return false
		}
		q, ok := pw.quota[res.m.root.ID]
		if !ok {
			var err error
			if q, err = pw.s.quotaFigures(res.m.root.ID); err != nil {
				return false
			}
			pw.quota[res.m.root.ID] = q
		}
		if name == "quota-used-bytes" {
			v = strconv.FormatInt(q.used, 10)
		} else {
			if q.available < 0 {
				return false // no quota, and a store that cannot tell its room
			}
			v = strconv.FormatInt(q.available, 10)
		}
	default:
		return false
	}
	if write {
		if v == "" {
			writeEmptyLive(b, name)
		} else {
			b.WriteString("<D:")
			b.WriteString(name)
			b.WriteByte('>')
			b.WriteString(v)
			b.WriteString("</D:")
			b.WriteString(name)
			b.WriteByte('>')
		}
	}
	return true
}

// element writes the live property name with the text v, which needs no
// escaping, when write is set, and reports that res has it.
func (pw *propWriter) element(name string, v []byte, write bool) bool {
	if write {
		b := pw.b
		b.WriteString("<D:")
		b.WriteString(name)
		b.WriteByte('>')
		b.Write(v)
		b.WriteString("</D:")
		b.WriteString(name)
		b.WriteByte('>')
	}
	return true
}

// writeEmptyLive writes the empty element of live property name.
func writeEmptyLive(b *bufio.Writer, name string) {
	b.WriteString("<D:")
	b.WriteString(name)
	b.WriteString("/>")
}

// writeActiveLock writes a DAV:activelock element.
func writeActiveLock(b *strings.Builder, h heldLock) {
	l := h.l
	scope, depth := "exclusive", "0"
	if l.Shared {
		scope = "shared"
	}
	if l.Deep {
		depth = "infinity"
	}
	fmt.Fprintf(b, "<D:activelock><D:locktype><D:write/></D:locktype><D:lockscope><D:%s/></D:lockscope><D:depth>%s</D:depth>", scope, depth)
	if l.Owner != "" {
		b.WriteString("<D:owner>")
		if l.TokenRequired {
			b.WriteString(l.Owner) // a WebDAV owner: XML stored self-contained
		} else {
			b.WriteString(escape(l.Owner)) // a REST lock: the holder as text
		}
		b.WriteString("</D:owner>")
	}
	timeout := "Infinite"
	if !l.Expires.IsZero() {
		timeout = "Second-" + strconv.FormatInt(max(int64(time.Until(l.Expires).Seconds()), 0), 10)
	}
	fmt.Fprintf(b, "<D:timeout>%s</D:timeout><D:locktoken><D:href>%s</D:href></D:locktoken><D:lockroot><D:href>%s</D:href></D:lockroot></D:activelock>",
		timeout, escape(l.Token), escape(h.root))
}

// writeProp writes a dead property with its stored value (deadValue).
func writeProp(b *bufio.Writer, n xml.Name, v []byte) {
	lang, inner := splitDead(v)
	b.WriteString("<" + n.Local + ` xmlns="` + escape(n.Space) + `"`)
	if lang != "" {
		b.WriteString(` xml:lang="` + escape(lang) + `"`)
	}
	b.WriteByte('>')
	b.Write(inner)
	b.WriteString("</" + n.Local + ">")
}

func writeEmpty(b *bufio.Writer, n xml.Name) {
	if n.Space == davNS {
		b.WriteString("<D:" + n.Local + "/>")
		return
	}
	b.WriteString("<" + n.Local + ` xmlns="` + escape(n.Space) + `"/>`)
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
	body, err := parseXML(r.Body)
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
	b := bufio.NewWriter(w)
	b.WriteString(xml.Header + `<D:multistatus xmlns:D="DAV:"><D:response><D:href>`)
	b.WriteString(escape(s.h.href(s.path, n.Dir)))
	b.WriteString("</D:href>")
	for _, o := range ops {
		st := "200 OK"
		switch {
		case protected && isLive(o.name):
			st = "403 Forbidden"
		case protected:
			st = "424 Failed Dependency"
		}
		b.WriteString("<D:propstat><D:prop>")
		writeEmpty(b, o.name)
		b.WriteString("</D:prop><D:status>HTTP/1.1 " + st + "</D:status></D:propstat>")
	}
	b.WriteString("</D:response></D:multistatus>")
	flushAnswer(b)
	return nil
}

// escapeSegment escapes one path segment for an href.
func escapeSegment(name string) string {
	return strings.TrimPrefix((&urlPath{name}).escaped(), "/")
}

// flushAnswer sends the rest of a 207 whose status is out: a client that
// stopped reading gets nothing more, and there is no answer left to give
// it instead.
func flushAnswer(b *bufio.Writer) { _ = b.Flush() }

// quotaFigures are the RFC 4331 figures of a root; available is -1 when
// nothing bounds it that berth can tell.
type quotaFigures struct {
	used, available int64
}

// quotaFigures computes the RFC 4331 figures of root for the session's
// person. Used is what the person's own quota counts: every live root of
// theirs, from the ledger. Available is the least of what each quota of
// the session's writes leaves (the person's, their organization's and
// every ancestor's) and the store's free space above its reserve, the
// latter coarsened by vfs.FS.StoreRoom (chunks are stored once across
// tenants, so an exact figure would tell whether someone else had
// stored a file: see docs/webdav.md).
func (s *session) quotaFigures(root uint64) (quotaFigures, error) {
	fs := s.h.opts.FS
	u, err := fs.TallyUsage(s.ctx, account.TallyPerson(s.person.ID))
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
