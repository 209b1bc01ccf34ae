package webdav

import (
	"encoding/xml"
	"io"
	"net/http"
	"path"
	"slices"
	"strconv"
	"sync"
	"time"

	"berth/httpserve"
)

// Writing a PROPFIND answer. A Depth 1 listing of 10,000 files is 3 MB
// of XML with four named properties and 7 MB with allprop, whose every
// entry also carries supportedlock, lockdiscovery, displayname,
// creationdate and getcontenttype (RFC 4918 9.1). Each entry is appended
// to a byte slice (no bufio call per fragment, no string built per
// property), the constant runs of an entry are written as one, and dates
// are formatted by hand: time.AppendFormat reads its layout anew for each
// of the two dates of every entry, a fifth of allprop's own CPU time.

// propWriter writes one DAV:response per resource into buf, and hands buf
// to out when it holds a piece.
type propWriter struct {
	s     *session
	out   *answerWriter
	buf   []byte
	mode  string
	names []xml.Name
	// include are the live properties beyond allprop's that an allprop
	// asked for in DAV:include.
	include []string
	dead    bool                    // the request needs dead properties (needDead)
	quota   map[uint64]quotaFigures // by root, computed once per request
	// ext and ctype are the last extension looked up and its media type:
	// a folder's files mostly share a handful.
	ext, ctype string
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

// sendsTags reports whether the answer sends getetag: allprop does, a
// DAV:prop that names it does, propname never does.
func (pw *propWriter) sendsTags() bool {
	switch pw.mode {
	case "allprop":
		return true
	case "prop":
		return slices.Contains(pw.names, xml.Name{Space: davNS, Local: "getetag"})
	}
	return false
}

// Constant runs of an answer, written whole.
const (
	propOK      = "</D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat>"
	lockEntries = "<D:lockentry><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockentry>" +
		"<D:lockentry><D:lockscope><D:shared/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockentry>"
	supportedLock = "<D:supportedlock>" + lockEntries + "</D:supportedlock>"
	// allpropEnd ends allprop's live properties on a resource without
	// locks, and its propstat when no dead property follows.
	allpropEnd = supportedLock + "<D:lockdiscovery/>"
)

func (pw *propWriter) write(res *resource) error {
	dead := res.dead
	if pw.dead && res.m != nil && !res.fetched {
		var err error
		if dead, err = pw.s.h.opts.FS.Props(pw.s.ctx, res.m.root.ID, res.n.ID); err != nil {
			return err
		}
	}
	b := append(pw.buf, "<D:response><D:href>"...)
	b = appendEscaped(b, res.href)
	b = append(b, "</D:href><D:propstat><D:prop>"...)
	switch pw.mode {
	case "propname":
		for _, l := range liveProps {
			b, _ = pw.live(b, res, l, false)
		}
		for k := range dead {
			b = appendEmpty(b, propName(k))
		}
		b = append(b, propOK...)
	case "allprop":
		b = pw.allprop(b, res)
		for _, l := range pw.include {
			b, _ = pw.live(b, res, l, true)
		}
		for k, v := range dead {
			b = appendProp(b, propName(k), v)
		}
		b = append(b, propOK...)
	default:
		var missing []xml.Name
		for _, n := range pw.names {
			if n.Space == davNS && isLive(n) {
				var ok bool
				if b, ok = pw.live(b, res, n.Local, true); ok {
					continue
				}
			}
			if v, ok := dead[propKey(n)]; ok {
				b = appendProp(b, n, v)
				continue
			}
			missing = append(missing, n)
		}
		b = append(b, propOK...)
		if len(missing) > 0 {
			b = append(b, "<D:propstat><D:prop>"...)
			for _, n := range missing {
				b = appendEmpty(b, n)
			}
			b = append(b, "</D:prop><D:status>HTTP/1.1 404 Not Found</D:status></D:propstat>"...)
		}
	}
	b = append(b, "</D:response>"...)
	for len(b) >= answerPiece {
		b = pw.out.put(b)
	}
	pw.buf = b
	return nil
}

// allprop appends the live properties of res that allprop lists, in
// liveProps' order: what live appends for each, without its two look-ups
// by name per property, and with the runs that do not change from entry
// to entry written as one.
func (pw *propWriter) allprop(b []byte, res *resource) []byte {
	n := &res.n
	if n.Dir {
		b = append(b, "<D:resourcetype><D:collection/></D:resourcetype>"...)
	} else {
		b = append(b, "<D:resourcetype/>"...)
	}
	if res.m != nil {
		b = append(b, "<D:displayname>"...)
		b = appendEscaped(b, n.Name)
		b = append(b, "</D:displayname>"...)
	}
	if !n.Created.IsZero() {
		b = append(b, "<D:creationdate>"...)
		b = appendRFC3339(b, n.Created)
		b = append(b, "</D:creationdate>"...)
	}
	if !n.Modified.IsZero() {
		b = append(b, "<D:getlastmodified>"...)
		b = appendHTTPDate(b, n.Modified)
		b = append(b, "</D:getlastmodified>"...)
	}
	b = append(b, "<D:getetag>"...)
	b = append(b, fileInfoETag(*n)...)
	b = append(b, "</D:getetag>"...)
	if !n.Dir {
		b = append(b, "<D:getcontentlength>"...)
		b = strconv.AppendInt(b, n.Size, 10)
		b = append(b, "</D:getcontentlength><D:getcontenttype>"...)
		b = appendEscaped(b, pw.contentType(n.Name))
		b = append(b, "</D:getcontenttype>"...)
	}
	if res.m == nil {
		return b
	}
	if len(res.inherited) == 0 && len(n.Locks) == 0 {
		return append(b, allpropEnd...)
	}
	b = append(b, supportedLock...)
	b, _ = pw.live(b, res, "lockdiscovery", true)
	return b
}

// live appends the live property name of res when it has one, with its
// value when value is set and as an empty element otherwise (propname),
// and reports whether it has.
func (pw *propWriter) live(b []byte, res *resource, name string, value bool) ([]byte, bool) {
	n := &res.n
	has := true
	switch name {
	case "resourcetype", "getetag":
	case "displayname", "supportedlock", "lockdiscovery":
		has = res.m != nil
	case "creationdate":
		has = !n.Created.IsZero()
	case "getlastmodified":
		has = !n.Modified.IsZero()
	case "getcontentlength", "getcontenttype":
		has = !n.Dir
	case "quota-used-bytes", "quota-available-bytes":
		has = res.m != nil && n.Dir
	default:
		has = false
	}
	if !has {
		return b, false
	}
	if !value {
		return appendEmptyLive(b, name), true
	}
	start := len(b)
	b = append(b, "<D:"...)
	b = append(b, name...)
	b = append(b, '>')
	switch name {
	case "resourcetype":
		if !n.Dir {
			return appendEmptyLive(b[:start], name), true
		}
		b = append(b, "<D:collection/>"...)
	case "displayname":
		b = appendEscaped(b, n.Name)
	case "creationdate":
		b = appendRFC3339(b, n.Created)
	case "getlastmodified":
		b = appendHTTPDate(b, n.Modified)
	case "getetag":
		// Quotes, letters, digits and '-': nothing that element text
		// must escape.
		b = append(b, fileInfoETag(*n)...)
	case "getcontentlength":
		b = strconv.AppendInt(b, n.Size, 10)
	case "getcontenttype":
		b = appendEscaped(b, pw.contentType(n.Name))
	case "supportedlock":
		b = append(b, lockEntries...)
	case "lockdiscovery":
		end := len(b)
		for _, h := range res.inherited {
			b = appendActiveLock(b, h)
		}
		for _, l := range n.Locks {
			b = appendActiveLock(b, heldLock{l: l, root: res.href})
		}
		if len(b) == end {
			return appendEmptyLive(b[:start], name), true
		}
	case "quota-used-bytes", "quota-available-bytes":
		q, ok := pw.quota[res.m.root.ID]
		if !ok {
			var err error
			if q, err = pw.s.quotaFigures(res.m.root.ID); err != nil {
				return b[:start], false
			}
			pw.quota[res.m.root.ID] = q
		}
		if name == "quota-used-bytes" {
			b = strconv.AppendInt(b, q.used, 10)
		} else {
			if q.available < 0 {
				return b[:start], false // no quota, and a store that cannot tell its room
			}
			b = strconv.AppendInt(b, q.available, 10)
		}
	}
	b = append(b, "</D:"...)
	b = append(b, name...)
	return append(b, '>'), true
}

// contentType is httpserve.ContentType, remembered for the last
// extension asked.
func (pw *propWriter) contentType(name string) string {
	if ext := path.Ext(name); ext != pw.ext || pw.ctype == "" {
		pw.ext, pw.ctype = ext, httpserve.ContentType(name)
	}
	return pw.ctype
}

// appendEmptyLive appends the empty element of live property name.
func appendEmptyLive(b []byte, name string) []byte {
	b = append(b, "<D:"...)
	b = append(b, name...)
	return append(b, "/>"...)
}

// appendActiveLock appends a DAV:activelock element.
func appendActiveLock(b []byte, h heldLock) []byte {
	l := h.l
	b = append(b, "<D:activelock><D:locktype><D:write/></D:locktype><D:lockscope>"...)
	if l.Shared {
		b = append(b, "<D:shared/>"...)
	} else {
		b = append(b, "<D:exclusive/>"...)
	}
	b = append(b, "</D:lockscope><D:depth>"...)
	if l.Deep {
		b = append(b, "infinity"...)
	} else {
		b = append(b, '0')
	}
	b = append(b, "</D:depth>"...)
	if l.Owner != "" {
		b = append(b, "<D:owner>"...)
		if l.TokenRequired {
			b = append(b, l.Owner...) // a WebDAV owner: XML stored self-contained
		} else {
			b = appendEscaped(b, l.Owner) // a REST lock: the holder as text
		}
		b = append(b, "</D:owner>"...)
	}
	b = append(b, "<D:timeout>"...)
	if l.Expires.IsZero() {
		b = append(b, "Infinite"...)
	} else {
		b = append(b, "Second-"...)
		b = strconv.AppendInt(b, max(int64(time.Until(l.Expires).Seconds()), 0), 10)
	}
	b = append(b, "</D:timeout><D:locktoken><D:href>"...)
	b = appendEscaped(b, l.Token)
	b = append(b, "</D:href></D:locktoken><D:lockroot><D:href>"...)
	b = appendEscaped(b, h.root)
	return append(b, "</D:href></D:lockroot></D:activelock>"...)
}

// appendProp appends a dead property with its stored value (deadValue).
func appendProp(b []byte, n xml.Name, v []byte) []byte {
	lang, inner := splitDead(v)
	b = append(b, '<')
	b = append(b, n.Local...)
	b = append(b, ` xmlns="`...)
	b = appendEscaped(b, n.Space)
	b = append(b, '"')
	if lang != "" {
		b = append(b, ` xml:lang="`...)
		b = appendEscaped(b, lang)
		b = append(b, '"')
	}
	b = append(b, '>')
	b = append(b, inner...)
	b = append(b, "</"...)
	b = append(b, n.Local...)
	return append(b, '>')
}

// appendEmpty appends the empty element of property n.
func appendEmpty(b []byte, n xml.Name) []byte {
	if n.Space == davNS {
		return appendEmptyLive(b, n.Local)
	}
	b = append(b, '<')
	b = append(b, n.Local...)
	b = append(b, ` xmlns="`...)
	b = appendEscaped(b, n.Space)
	return append(b, `"/>`...)
}

// appendEscaped appends s escaped for XML text or attribute values, as
// escape returns it.
func appendEscaped(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if !xmlPlain[s[i]] {
			w := appendWriter{b}
			xml.EscapeText(&w, []byte(s))
			return w.b
		}
	}
	return append(b, s...)
}

// xmlPlain are the bytes that XML text and attribute values hold as they
// are (escape's test, by table: every href and name of an answer goes
// through it).
var xmlPlain = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = c != '&' && c != '<' && c != '>' && c != '"' && c != '\''
	}
	return t
}()

// appendWriter is an io.Writer that appends to b.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// Dates. time.AppendFormat gives the same text; these only skip reading
// the layout, for years of four digits (others go to it).

const (
	weekdays = "SunMonTueWedThuFriSat"
	months   = "JanFebMarAprMayJunJulAugSepOctNovDec"
)

// civil is a time's date and clock in UTC.
type civil struct{ y, mo, d, hh, mm, ss, wd int }

// civilOf splits t, in UTC; ok is false for a year that is not four
// digits, which the formats below leave to time.AppendFormat.
func civilOf(t time.Time) (c civil, ok bool) {
	t = t.UTC()
	y, mo, d := t.Date()
	hh, mm, ss := t.Clock()
	return civil{y, int(mo), d, hh, mm, ss, int(t.Weekday())}, y >= 0 && y <= 9999
}

// appendHTTPDate appends t as http.TimeFormat (getlastmodified, RFC 4918
// 15.7 and RFC 9110 5.6.7's IMF-fixdate).
func appendHTTPDate(b []byte, t time.Time) []byte {
	c, ok := civilOf(t)
	if !ok {
		return t.UTC().AppendFormat(b, http.TimeFormat)
	}
	b = append(b, weekdays[c.wd*3:c.wd*3+3]...)
	b = append(b, ", "...)
	b = append2(b, c.d)
	b = append(b, ' ')
	b = append(b, months[(c.mo-1)*3:c.mo*3]...)
	b = append(b, ' ')
	b = append4(b, c.y)
	b = append(b, ' ')
	b = appendClock(b, c)
	return append(b, " GMT"...)
}

// appendRFC3339 appends t in UTC as time.RFC3339 (creationdate, RFC 4918
// 15.1).
func appendRFC3339(b []byte, t time.Time) []byte {
	c, ok := civilOf(t)
	if !ok {
		return t.UTC().AppendFormat(b, time.RFC3339)
	}
	b = append4(b, c.y)
	b = append(b, '-')
	b = append2(b, c.mo)
	b = append(b, '-')
	b = append2(b, c.d)
	b = append(b, 'T')
	b = appendClock(b, c)
	return append(b, 'Z')
}

func appendClock(b []byte, c civil) []byte {
	b = append2(b, c.hh)
	b = append(b, ':')
	b = append2(b, c.mm)
	b = append(b, ':')
	return append2(b, c.ss)
}

func append2(b []byte, v int) []byte { return append(b, byte('0'+v/10), byte('0'+v%10)) }

func append4(b []byte, v int) []byte {
	return append(b, byte('0'+v/1000), byte('0'+v/100%10), byte('0'+v/10%10), byte('0'+v%10))
}

// A long answer goes out a piece at a time from a goroutine of its own,
// while the handler formats the next piece: written from the handler,
// every piece waited for crypto/tls and the socket (and, over HTTP/2, for
// the connection's writer goroutine) with the formatting stopped, where
// the two overlap on two cores. A short answer (one piece) is written by
// close, without the goroutine.

// answerPiece is what the handler hands on at a time: four TLS records,
// and no more than the daemon's send-idle timeout lets one write take
// (daemon/sendidle.go's maxIdleWrite), which would split a longer one and
// send its few last bytes as a chunk and a TLS record of their own.
const answerPiece = 64 << 10

// pieces are answer buffers, with room for the entry that crosses
// answerPiece.
var pieces = sync.Pool{New: func() any { b := make([]byte, 0, answerPiece+16<<10); return &b }}

// answerWriter sends pieces of an answer to w in order.
type answerWriter struct {
	w      io.Writer
	full   chan []byte // pieces to send; nil until the first
	empty  chan []byte // pieces sent, for reuse
	done   chan struct{}
	err    error // the first failed write, set by the sender
	closed bool
}

func newAnswerWriter(w io.Writer) *answerWriter { return &answerWriter{w: w} }

// take returns an empty buffer for the first piece.
func (a *answerWriter) take() []byte { return (*pieces.Get().(*[]byte))[:0] }

// put hands the first answerPiece bytes of b on to be sent and returns a
// buffer with the rest of b for the next piece, waiting for the piece
// before to be sent.
func (a *answerWriter) put(b []byte) []byte {
	if a.full == nil {
		a.full, a.empty, a.done = make(chan []byte, 1), make(chan []byte, 2), make(chan struct{})
		a.empty <- a.take()
		go a.send()
	}
	a.full <- b[:answerPiece]
	// The sender only reads b, and hands it back after the buffer it
	// holds now: what comes back here is the other one.
	return append(<-a.empty, b[answerPiece:]...)
}

func (a *answerWriter) send() {
	defer close(a.done)
	for b := range a.full {
		if a.err == nil {
			_, a.err = a.w.Write(b)
		}
		a.empty <- b[:0]
	}
}

// close sends last, unless nil, waits for every piece to be sent, and
// returns the buffers to the pool, unless a write failed, and the first
// failed write. It must be called before the handler returns (nothing
// may write to w after), and may be called again.
func (a *answerWriter) close(last []byte) error {
	if a.closed {
		return a.err
	}
	a.closed = true
	for len(last) > answerPiece {
		last = a.put(last)
	}
	if a.full == nil {
		if last != nil {
			if _, a.err = a.w.Write(last); a.err == nil {
				putPiece(last)
			}
		}
		return a.err
	}
	if last != nil {
		a.full <- last
	}
	close(a.full)
	<-a.done
	close(a.empty)
	// A failed write's bytes may still be read after it returned:
	// net/http's HTTP/2 writer returns errStreamClosed once the client
	// resets the stream, while the frame it handed on may still be
	// being copied (writeDataFromHandler). Another answer must not fill
	// them with its listing, so those buffers go to the collector.
	if a.err == nil {
		for b := range a.empty {
			putPiece(b)
		}
	}
	return a.err
}

// putPiece returns b to the pool unless an entry of large dead
// properties grew it.
func putPiece(b []byte) {
	if cap(b) <= answerPiece+16<<10 {
		b = b[:0]
		pieces.Put(&b)
	}
}
