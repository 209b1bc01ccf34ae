package httpserve

import (
	"cmp"
	"context"
	"errors"
	"io"
	"iter"
	"log/slog"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"berth/vfs"
)

// Content is a file to download and what describes it to the client.
type Content struct {
	// Name is the file's name: its extension gives the Content-Type (never
	// the contents), and the client saves the download under it.
	Name string
	// Type, when set, is the Content-Type instead of the extension's.
	Type string
	// ETag is vfs's entity tag of the revision, the same over every front end.
	ETag string
	// Modified is the Last-Modified time.
	Modified time.Time
	// Body is read only where the request asks (Range).
	Body io.ReadSeeker
	// Inline asks a browser to show the content rather than save it
	// (Content-Disposition: inline), for a view or a preview.
	Inline bool
	// CSP replaces DownloadCSP as the answer's Content-Security-Policy,
	// for a preview a page of berth's own embeds.
	CSP string
	// Fail writes the answer to an error http.ServeContent finds itself:
	// 416 for an unsatisfiable Range, 412 for a failed If-Match or
	// If-Unmodified-Since, 500 should seeking Body fail. It is handed the
	// status and the writer below ServeContent's, with the headers set for
	// the body dropped (Content-Range of a 416 stays), so a front end
	// answers in its own form. Nil keeps ServeContent's plain-text answers.
	Fail func(w http.ResponseWriter, status int)
}

// DownloadCSP is the Content-Security-Policy of every file's contents
// served on berth's origin: whatever a browser renders of a user's file
// (an .html or .svg shown inline by a link's view) runs in a sandbox of
// no origin, with no script and nothing loaded, so a shared file can
// never act as berth's own page toward the credentials a browser keeps
// for the origin (WebDAV Basic, share-link cookies).
const DownloadCSP = "default-src 'none'; sandbox; frame-ancestors 'none'"

// DownloadCacheControl is the Cache-Control of every file's contents
// served, on every front end. Private: a download is behind
// authentication (or a link's secret). no-cache: a client keeps it, but
// revalidates its ETag before reuse, since a new revision may replace it
// at any time; without it, a browser or a mount's cache may reuse the
// answer unasked for a while it guesses from Last-Modified (RFC 9111
// 4.2.2's heuristic freshness: a tenth of the file's age), stale the
// whole time a newer revision is there.
const DownloadCacheControl = "private, no-cache"

// ServeContent answers r with c through http.ServeContent: Range (206),
// If-None-Match and If-Modified-Since (304), If-Range, HEAD, with dates
// held to what they prove (DateConditions). The answer is
// an attachment (or, with Inline, inline) of a type chosen by the name's
// extension, is never sniffed, and carries DownloadCSP. The Range is the
// one berth serves (ServableRange), and none at all for empty contents
// (DropEmptyRange).
//
// The answer of a body at hand (a Copier, as vfs.File) is sent with its
// connection held (Hold), in large writes; a zip, made as it is sent,
// goes out as it comes.
//
// ServeContent drops read errors. The first one is returned here: the
// response has started by then, so the caller must not let a short body
// with a success status pass for the file; Abort is the rule.
func ServeContent(w http.ResponseWriter, r *http.Request, c Content) error {
	cd := ContentDisposition(c.Name)
	if c.Inline {
		cd = "inline" + strings.TrimPrefix(cd, "attachment")
	}
	ct := cmp.Or(c.Type, ContentType(c.Name))
	csp := cmp.Or(c.CSP, DownloadCSP)
	hdrs := []string{"Etag", c.ETag, "Content-Type", ct, "Content-Disposition", cd,
		"X-Content-Type-Options", "nosniff", "Content-Security-Policy", csp, "Cache-Control", DownloadCacheControl}
	body := NewBody(c.Body)
	DateConditions(r, c.Modified)
	if SendWhole(w, r, c.Modified, body, hdrs...) {
		return body.Err()
	}
	SetHeaders(w.Header(), hdrs...)
	if r.Header.Get("Range") != "" {
		ServableRange(r)
		DropEmptyRange(r, body)
	}
	if c.Fail != nil {
		w = &failWriter{ResponseWriter: w, fail: c.Fail}
	}
	if _, ok := c.Body.(Copier); ok {
		release := Hold(w, r)
		defer func() { _ = release() }()
	}
	http.ServeContent(sendWriter{w}, r, "", c.Modified, body)
	return body.Err()
}

// DateConditions makes r's If-Modified-Since and If-Unmodified-Since
// claim no more than a date can prove of contents last modified at
// modified, for http.ServeContent (called here, or by x/net/webdav) to
// read next. A date has whole seconds, and ServeContent compares
// modified truncated to its second: a revision written within the
// second a client's date names, after the one the client holds (two
// revisions share the second, and their one Last-Modified), was "not
// modified since" that date. The client was answered 304 and kept the
// older bytes as current, and an If-Unmodified-Since of it let a write
// replace a revision its client never saw. So a date proves the
// contents unchanged only when modified is before the second the date
// names began; otherwise If-Modified-Since is dropped (the whole
// contents, 200) and If-Unmodified-Since fails (it is set to the second
// before modified's, which ServeContent answers 412). An
// If-Modified-Since later than now is no date the contents had (RFC
// 2616 14.25, Apache's rule) and is dropped too. A client that
// revalidates by the ETag (If-None-Match, If-Match), which names the
// revision itself, is answered exactly as before: those headers take
// precedence over the dates (RFC 9110 13.2.2), and a date they make
// ServeContent ignore is left as it is. Contents without a
// modification time (a zip) have no date to compare, as in
// ServeContent.
func DateConditions(r *http.Request, modified time.Time) {
	if modified.IsZero() || modified.Equal(time.Unix(0, 0)) {
		return
	}
	h := r.Header
	if h.Get("If-Match") == "" {
		if t, ok := headerDate(h, "If-Unmodified-Since"); ok {
			if modified.Before(t) {
				h.Del("If-Unmodified-Since")
			} else {
				h.Set("If-Unmodified-Since", httpDate(modified.Truncate(time.Second).Add(-time.Second)))
			}
		}
	}
	if h.Get("If-None-Match") != "" || r.Method != http.MethodGet && r.Method != http.MethodHead {
		return
	}
	if t, ok := headerDate(h, "If-Modified-Since"); ok && !(modified.Before(t) && !t.After(time.Now())) {
		h.Del("If-Modified-Since")
	}
}

// headerDate is the date of h's header k, as http.ServeContent reads it;
// false when there is none or it is no date (ServeContent ignores it).
func headerDate(h http.Header, k string) (time.Time, bool) {
	v := h.Get(k)
	if v == "" {
		return time.Time{}, false
	}
	t, err := http.ParseTime(v)
	return t, err == nil
}

// DropEmptyRange removes r's Range when body is empty, so that
// http.ServeContent sends the empty contents, 200, as it already does
// for a Range of positions (bytes=0-0 of an empty file: "some clients
// add a Range header to all requests"). A suffix part (bytes=-5) it
// answered 206 with Content-Range "bytes 0--1/0", a range that ends
// before it starts, which no client can read: no byte of an empty file
// can be sent as a part. body is rewound; a body that cannot seek is
// left to ServeContent, which answers that error.
func DropEmptyRange(r *http.Request, body io.ReadSeeker) {
	if size, ok := sizeOf(body); ok && size == 0 {
		r.Header.Del("Range")
	}
}

// SendWhole answers r with the whole of body and status 200, with the
// headers of kv (pairs as SetHeaders takes them) and those
// http.ServeContent adds (Last-Modified from modified, Accept-Ranges,
// Content-Length), when r is a GET or HEAD that ServeContent would answer
// so whatever the contents: no Range and no precondition. It reports
// whether it answered; when it did not, nothing is written or set and the
// caller goes on to ServeContent. Setting the headers at once and writing
// the body straight from body's Copier costs a small download about a
// fifth of the handler's CPU less than ServeContent, which canonicalizes
// and allocates header by header, checks each precondition header, and
// copies through io.CopyN. A read error is kept in body, as there. A
// Copier body is sent with its connection held (Hold), in large writes.
func SendWhole(w http.ResponseWriter, r *http.Request, modified time.Time, body *Body, kv ...string) bool {
	if !PlainGet(r) {
		return false
	}
	size, ok := sizeOf(body)
	if !ok {
		return false
	}
	h := w.Header()
	// ServeContent's headers join the caller's in one allocation of
	// values (setHeaders).
	var extra [6]string
	more := append(extra[:0], "Accept-Ranges", "bytes")
	if !modified.IsZero() && !modified.Equal(time.Unix(0, 0)) {
		more = append(more, "Last-Modified", httpDate(modified))
	}
	if _, coded := h["Content-Encoding"]; !coded && !hasKey(kv, "Content-Encoding") {
		more = append(more, "Content-Length", strconv.FormatInt(size, 10))
	}
	setHeaders(h, kv, more)
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		if _, ok := body.rs.(Copier); ok {
			// Contents at hand (decoded chunks), not made as they are
			// sent, as a folder's zip is: holding them back costs the
			// client no wait. A failed release is the client's
			// failure, as a failed write.
			h := hold(w, r)
			defer func() { _ = h.release() }()
		}
		// w as it is: CopyTo hides its ReadFrom (errWriter, writerOnly)
		// without boxing it once more here.
		_, _ = body.CopyTo(w, size)
	}
	return true
}

// httpDate is t as a Last-Modified value (http.TimeFormat), formatted
// once per second of modification time seen lately: formatting it was an
// allocation and a few per cent of a small GET's CPU in the handler, and
// the files a client fetches again and again are few. A slot keeps the
// last second that fell into it, so a miss costs one more allocation
// than formatting alone.
func httpDate(t time.Time) string {
	sec := t.Unix()
	slot := &httpDates[uint64(sec)%uint64(len(httpDates))]
	if d := slot.Load(); d != nil && d.sec == sec {
		return d.s
	}
	d := &formattedDate{sec: sec, s: t.UTC().Format(http.TimeFormat)}
	slot.Store(d)
	return d.s
}

// formattedDate is a second and its http.TimeFormat.
type formattedDate struct {
	sec int64
	s   string
}

// httpDates are httpDate's slots, by second.
var httpDates [256]atomic.Pointer[formattedDate]

// hasKey reports whether the pairs of kv set the header k.
func hasKey(kv []string, k string) bool {
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i] == k {
			return true
		}
	}
	return false
}

// PlainGet reports whether r is a GET or HEAD that http.ServeContent
// answers with the whole contents and status 200, whatever they are.
func PlainGet(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	for _, k := range []string{"Range", "If-Match", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since", "If-Range"} {
		if _, ok := r.Header[k]; ok {
			return false
		}
	}
	return true
}

// sizeOf is the size of rs, found as http.ServeContent finds it, and
// rewinds rs to its start; false when seeking fails (ServeContent then
// answers the error).
func sizeOf(rs io.ReadSeeker) (int64, bool) {
	size, err := rs.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, false
	}
	if _, err := rs.Seek(0, io.SeekStart); err != nil {
		return 0, false
	}
	return size, true
}

// SetHeaders sets each pair of kv (a canonical header name, then its
// one value) in h, with one allocation for all the values: Header.Set
// canonicalizes each name and allocates a slice per value, a tenth of a
// small download's CPU in the handler. The names must be canonical
// (textproto.CanonicalMIMEHeaderKey), as Header.Get looks them up so.
func SetHeaders(h http.Header, kv ...string) { setHeaders(h, kv, nil) }

// setHeaders is SetHeaders of the pairs of kv, then of more, with one
// allocation for all their values.
func setHeaders(h http.Header, kv, more []string) {
	vals := make([]string, (len(kv)+len(more))/2)
	for i := range vals {
		k, v := 2*i, 2*i+1
		if k >= len(kv) {
			k, v = k-len(kv), v-len(kv)
			vals[i] = more[v]
			h[more[k]] = vals[i : i+1 : i+1]
			continue
		}
		vals[i] = kv[v]
		h[kv[k]] = vals[i : i+1 : i+1]
	}
}

// ServeZip answers r with z, the zip of a folder named name (".zip" is
// added), through ServeContent: an application/zip attachment with its
// exact Content-Length and ETag, Range (206) and If-Range, If-None-Match
// (304), HEAD. It has no Last-Modified: an If-Range must be the ETag, so a
// resumption against a folder changed since gets the whole new archive,
// never a mix of two. fail is as Content.Fail. A read error after the
// answer started is returned, for the caller to abort the connection.
func ServeZip(w http.ResponseWriter, r *http.Request, name string, z *vfs.Zip, fail func(http.ResponseWriter, int)) error {
	body := z.Reader(r.Context())
	defer body.Close()
	return ServeContent(w, r, Content{
		Name: name + ".zip", Type: "application/zip", ETag: z.ETag(), Body: body, Fail: fail,
	})
}

// failWriter hands the error answers http.ServeContent writes (in plain
// text, or with no body at all) to a front end's own writer.
type failWriter struct {
	http.ResponseWriter
	fail   func(http.ResponseWriter, int)
	failed bool
}

// WriteHeader passes a success or a redirect on, and hands an error status
// to the front end's writer instead, without the headers set for the body
// it replaces.
func (f *failWriter) WriteHeader(code int) {
	if code < 400 {
		f.ResponseWriter.WriteHeader(code)
		return
	}
	h := f.Header()
	for _, k := range []string{"Content-Disposition", "Content-Length", "Content-Encoding"} {
		h.Del(k)
	}
	f.failed = true
	f.fail(f.ResponseWriter, code)
}

// Write drops ServeContent's own error text once fail has answered.
func (f *failWriter) Write(b []byte) (int, error) {
	if f.failed {
		return len(b), nil // ServeContent's text body; the front end's is out
	}
	return f.ResponseWriter.Write(b)
}

// Unwrap gives http.ResponseController the underlying writer.
func (f *failWriter) Unwrap() http.ResponseWriter { return f.ResponseWriter }

// Copier is a body that can send n bytes from its offset straight to w,
// without a copy through a buffer of the caller's (vfs.File, whose chunks
// are already decoded in memory). The end of the contents before n bytes
// is no error.
type Copier interface {
	CopyTo(w io.Writer, n int64) (int64, error)
}

// ReadFrom is what a download's ResponseWriter does when io.Copy hands it
// a body (its io.ReaderFrom): http.ServeContent sends a range with
// io.CopyN, which wraps the body in an io.LimitedReader, hiding any
// io.WriterTo, and net/http's own ReadFrom then copies through a 32 KiB
// buffer, one more copy of every byte. When src is such a reader over a
// Copier, the body writes to w itself; anything else is copied as io.Copy
// does. w must not be the writer whose ReadFrom this is (that
// would recurse): pass it wrapped so that only Write shows.
func ReadFrom(w io.Writer, src io.Reader) (int64, error) {
	if lr, ok := src.(*io.LimitedReader); ok {
		if c, ok := lr.R.(Copier); ok {
			n, err := c.CopyTo(w, lr.N)
			lr.N -= n
			return n, err
		}
	}
	return io.Copy(writerOnly{w}, src)
}

// writerOnly hides everything of a writer but Write, so io.Copy does not
// call its ReadFrom.
type writerOnly struct{ io.Writer }

// sendWriter is the ResponseWriter ServeContent writes to: it sends a
// Copier body without copying it (ReadFrom).
type sendWriter struct{ http.ResponseWriter }

// ReadFrom sends src through ReadFrom.
func (s sendWriter) ReadFrom(src io.Reader) (int64, error) {
	return ReadFrom(writerOnly{s.ResponseWriter}, src)
}

// Unwrap gives http.ResponseController the underlying writer.
func (s sendWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Body is the io.ReadSeeker handed to http.ServeContent (directly, or by a
// library such as x/net/webdav): it keeps the first read error, which
// ServeContent drops. It is safe for concurrent use: ServeContent reads
// the parts of a multi-range answer in a goroutine that it does not wait
// for when a write to the client fails, so that goroutine may still read
// while the handler returns.
type Body struct {
	rs  io.ReadSeeker
	mu  sync.Mutex
	err error
	// ew is CopyTo's writer, here rather than an allocation of its own:
	// a Body is sent by one CopyTo at a time (ServeContent's multi-range
	// goroutine only reads).
	ew errWriter
}

// NewBody returns rs keeping its first read error.
func NewBody(rs io.ReadSeeker) *Body { return &Body{rs: rs} }

// Send is the Stream of a download over w and the Body it sends from
// rs, made in one allocation rather than two: a small GET makes both.
type Send struct {
	Stream Stream
	Body   Body
}

// NewSend returns the Stream over w and the Body of rs of one download.
func NewSend(w http.ResponseWriter, rs io.ReadSeeker) *Send {
	return &Send{Stream: Stream{ResponseWriter: w}, Body: Body{rs: rs}}
}

// Read reads from the contents; an error other than io.EOF is kept.
func (b *Body) Read(p []byte) (int, error) {
	n, err := b.rs.Read(p)
	if err != nil && err != io.EOF {
		b.mu.Lock()
		if b.err == nil {
			b.err = err
		}
		b.mu.Unlock()
	}
	return n, err
}

// CopyTo sends up to n bytes from the offset to w, through the contents'
// own CopyTo when they have one (else through Read). A read error is kept,
// as by Read; a write error is not, since it is the client's.
func (b *Body) CopyTo(w io.Writer, n int64) (int64, error) {
	c, ok := b.rs.(Copier)
	if !ok {
		return io.Copy(writerOnly{w}, io.LimitReader(readerOnly{b}, n))
	}
	b.ew = errWriter{w: w}
	ew := &b.ew
	m, err := c.CopyTo(ew, n)
	if err != nil && ew.err == nil {
		b.mu.Lock()
		if b.err == nil {
			b.err = err
		}
		b.mu.Unlock()
	}
	return m, err
}

// readerOnly hides everything of a reader but Read.
type readerOnly struct{ io.Reader }

// errWriter notes whether a write failed, to tell a client's failure from
// the contents'.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	n, err := e.w.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		e.err = err
	}
	return n, err
}

// Seek seeks in the contents.
func (b *Body) Seek(off int64, whence int) (int64, error) { return b.rs.Seek(off, whence) }

// Err returns the first read error, or nil.
func (b *Body) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// Stream is the ResponseWriter of a download: it notes whether the answer
// has started, which decides between an error answer and an aborted
// connection, and whether a write to the client failed.
type Stream struct {
	http.ResponseWriter
	started     bool
	writeFailed bool
}

// Started reports whether a status or a byte of the body was written.
func (s *Stream) Started() bool { return s.started }

// WriteFailed reports whether a write to the client failed: the client is
// gone (HTTP/2 reports a closed stream before it cancels the request).
func (s *Stream) WriteFailed() bool { return s.writeFailed }

// WriteHeader notes a final status (1xx answers are interim).
func (s *Stream) WriteHeader(code int) {
	if code >= 200 {
		s.started = true
	}
	s.ResponseWriter.WriteHeader(code)
}

// Write notes the start and a failed write.
func (s *Stream) Write(b []byte) (int, error) {
	s.started = true
	n, err := s.ResponseWriter.Write(b)
	if err != nil {
		s.writeFailed = true
	}
	return n, err
}

// ReadFrom sends src through ReadFrom, writing through s.Write, so that a
// Copier body is sent without a copy and the start and a failed write are
// still noted.
func (s *Stream) ReadFrom(src io.Reader) (int64, error) {
	return ReadFrom(writerOnly{s}, src)
}

// Flush lets streaming handlers push buffered bytes.
func (s *Stream) Flush() {
	s.started = true
	_ = http.NewResponseController(s.ResponseWriter).Flush()
}

// Unwrap gives http.ResponseController the underlying writer.
func (s *Stream) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Abort ends a download that failed after its response started (a read
// error, a zip entry that could not be read): there is no error answer
// left to send, and a short body with a success status must never pass for
// the whole file. It logs err (at Debug when clientGone: a client that
// went away is no failure of the server's), counts the aborted stream, and
// panics with http.ErrAbortHandler, which net/http turns into a broken
// connection (HTTP/1.1) or a reset stream (HTTP/2). It does not return.
func (m *Metrics) Abort(log *slog.Logger, r *http.Request, route string, clientGone bool, err error) {
	if clientGone {
		log.Debug("download stopped: client went away", "route", route, "error", err)
	} else {
		log.Error("download failed after the response started", "route", route, "method", r.Method, "error", err)
	}
	m.AbortedStreams.Inc()
	panic(http.ErrAbortHandler)
}

// ClientGone reports whether err only says that the client went away (r's
// context is done, and err is its cancellation or deadline): nobody is
// left to read an answer, and the failure is not the server's. Every
// front end decides by it between an error answer, or a logged abort, and
// silence.
func ClientGone(r *http.Request, err error) bool {
	return r.Context().Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}

// ContentType is the media type of a file name's extension, or
// application/octet-stream; the contents are never read. mime looks the
// extension up as written first, then in lower case ("a.PDF").
func ContentType(name string) string {
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// ContentDisposition is an attachment header that keeps any name (RFC
// 6266): an ASCII fallback in filename for old clients and the exact UTF-8
// name in filename* (RFC 8187).
func ContentDisposition(name string) string {
	plain := true
	for i := 0; i < len(name) && plain; i++ {
		plain = isAttrChar(name[i])
	}
	if plain {
		// Most names need no escaping in either form: one string.
		return `attachment; filename="` + name + `"; filename*=UTF-8''` + name
	}
	var fb, ext strings.Builder
	for _, r := range name {
		switch {
		case r < 0x20 || r >= 0x7f || r == '"' || r == '\\' || r == '%':
			fb.WriteByte('_')
		default:
			fb.WriteRune(r)
		}
	}
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(name); i++ {
		c := name[i]
		if isAttrChar(c) {
			ext.WriteByte(c)
			continue
		}
		ext.WriteByte('%')
		ext.WriteByte(hex[c>>4])
		ext.WriteByte(hex[c&15])
	}
	return `attachment; filename="` + fb.String() + `"; filename*=UTF-8''` + ext.String()
}

// isAttrChar reports whether c may stand unencoded in an RFC 8187 value.
func isAttrChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$&+-.^_`|~", c) >= 0
}

// FailedCondition is the precondition of r that fails for a write to a
// resource of entity tag etag, last modified at modified, or none when
// exists is false, evaluated as RFC 9110 13.2.2 orders it: If-Match (no
// resource, or none of its tags matches etag strongly; "*" matches any
// resource), else If-Unmodified-Since (a resource not modified before
// the date's second, as DateConditions judges it; a date that is none,
// or a resource without a modification time, is ignored), then
// If-None-Match ("*" or a tag that matches etag weakly, on a resource
// that exists). The header's name is returned, "" when every condition
// holds. Tag lists are read as net/http reads them: a tag it cannot parse
// ends the list unmatched, so a malformed If-Match fails and a malformed
// If-None-Match holds.
func FailedCondition(r *http.Request, etag string, modified time.Time, exists bool) string {
	if im := r.Header.Get("If-Match"); im != "" {
		if !exists || !tagListHas(im, etag, false) {
			return "If-Match"
		}
	} else if exists && !modified.IsZero() && !modified.Equal(time.Unix(0, 0)) {
		if t, ok := headerDate(r.Header, "If-Unmodified-Since"); ok && !modified.Before(t) {
			return "If-Unmodified-Since"
		}
	}
	if inm := r.Header.Get("If-None-Match"); inm != "" && exists && tagListHas(inm, etag, true) {
		return "If-None-Match"
	}
	return ""
}

// MalformedCondition is the header of r, If-Match or If-None-Match, that
// is neither "*" nor a comma-separated list of entity tags (RFC 9110
// 13.1.1, 8.8.3), or "" when both are well formed or absent. A GET reads
// such a list as net/http does (FailedCondition too); a front end refuses
// a write that carries one, rather than guess what its client meant.
func MalformedCondition(r *http.Request) string {
	for _, k := range []string{"If-Match", "If-None-Match"} {
		if v := r.Header.Get(k); v != "" && !tagListValid(v) {
			return k
		}
	}
	return ""
}

// tagListValid reports whether v is "*" or a list of entity tags,
// separated by commas and optional white space (empty elements are
// allowed, RFC 9110 5.6.1).
func tagListValid(v string) bool {
	if strings.Trim(v, asciiSpace) == "*" {
		return true
	}
	for tag, apart := range tagList(v) {
		if tag == "" || tag == "*" || !apart {
			return false
		}
	}
	return true
}

// Conditional reports whether r has a precondition FailedCondition
// evaluates.
func Conditional(r *http.Request) bool {
	return r.Header.Get("If-Match") != "" || r.Header.Get("If-None-Match") != "" || r.Header.Get("If-Unmodified-Since") != ""
}

// failsPrecondition reports whether ServeContent answers r with 412 for
// contents of etag last modified at modified, after DateConditions: an
// If-Match that no tag of matches strongly, or without one an
// If-Unmodified-Since that the contents were not modified before.
func failsPrecondition(r *http.Request, etag string, modified time.Time) bool {
	if im := r.Header.Get("If-Match"); im != "" {
		return !tagListHas(im, etag, false)
	}
	if modified.IsZero() || modified.Equal(time.Unix(0, 0)) {
		return false
	}
	t, ok := headerDate(r.Header, "If-Unmodified-Since")
	return ok && !modified.Before(t)
}

// notModified reports whether ServeContent answers r with 304 for
// contents of etag last modified at modified: If-None-Match, read as
// ServeContent reads it (tagListHas, weakly), or without one an
// If-Modified-Since that DateConditions leaves (a date before now that the
// contents were modified before). Read more leniently (split at commas),
// "x, <etag>" was a 304 here while ServeContent sent the whole file,
// which a link's download_limit then never counted.
func notModified(r *http.Request, etag string, modified time.Time) bool {
	if inm := r.Header.Get("If-None-Match"); inm != "" {
		return tagListHas(inm, etag, true)
	}
	if modified.IsZero() || modified.Equal(time.Unix(0, 0)) {
		return false
	}
	t, ok := headerDate(r.Header, "If-Modified-Since")
	return ok && modified.Before(t) && !t.After(time.Now())
}

// tagListHas reports whether the list of entity tags buf (an If-Match or
// If-None-Match) has "*" or etag, compared weakly or strongly, reading it
// as net/http does (tagList): a tag it cannot parse ends the list
// unmatched, so that the tags after it do not count.
func tagListHas(buf, etag string, weak bool) bool {
	for tag := range tagList(buf) {
		switch {
		case tag == "":
			return false
		case tag == "*",
			weak && strings.TrimPrefix(tag, "W/") == strings.TrimPrefix(etag, "W/"),
			!weak && tag == etag && strings.HasPrefix(tag, `"`):
			return true
		}
	}
	return false
}

// tagList yields the elements of a list of entity tags as net/http reads
// them: "*" for an element that starts with one (and then stops), each
// tag, and "" for an element it cannot parse (and then stops). apart
// says whether the element is followed by a comma or the end, as RFC
// 9110's list syntax asks and net/http does not check.
func tagList(buf string) iter.Seq2[string, bool] {
	return func(yield func(string, bool) bool) {
		for {
			buf = strings.Trim(buf, asciiSpace)
			switch {
			case buf == "":
				return
			case buf[0] == ',':
				buf = buf[1:]
				continue
			case buf[0] == '*':
				yield("*", strings.Trim(buf[1:], asciiSpace) == "")
				return
			}
			tag, remain := scanETag(buf)
			if tag == "" {
				yield("", false)
				return
			}
			remain = strings.TrimLeft(remain, asciiSpace)
			if !yield(tag, remain == "" || remain[0] == ',') {
				return
			}
			buf = remain
		}
	}
}

// asciiSpace is what net/http trims around the tags of a header
// (textproto.TrimString).
const asciiSpace = " \t\r\n"

// scanETag is net/http's: the entity tag at the start of s (W/"x" or
// "x", of the characters RFC 9110 8.8.3 allows) and what follows it, or
// "" when s does not start with one.
func scanETag(s string) (etag, remain string) {
	s = strings.Trim(s, asciiSpace)
	start := 0
	if strings.HasPrefix(s, "W/") {
		start = 2
	}
	if len(s[start:]) < 2 || s[start] != '"' {
		return "", ""
	}
	for i := start + 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == 0x21 || c >= 0x23 && c <= 0x7E || c >= 0x80:
		case c == '"':
			return s[:i+1], s[i+1:]
		default:
			return "", ""
		}
	}
	return "", ""
}
