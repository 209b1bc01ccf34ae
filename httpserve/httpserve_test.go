package httpserve_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"berth/berthtest"
	"berth/httpserve"
)

// TestContentDisposition: the first four rows were rest's own
// TestContentDisposition, from when the header was built in rest.
func TestContentDisposition(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"a b.txt", `attachment; filename="a b.txt"; filename*=UTF-8''a%20b.txt`},
		// Quotes, backslashes and percent signs would end or escape the
		// quoted fallback; they are replaced there and encoded in filename*.
		{`q"x\y%`, `attachment; filename="q_x_y_"; filename*=UTF-8''q%22x%5Cy%25`},
		{"日本.txt", `attachment; filename="__.txt"; filename*=UTF-8''%E6%97%A5%E6%9C%AC.txt`},
		{"plain.go", `attachment; filename="plain.go"; filename*=UTF-8''plain.go`},
		// RFC 8187 attr-chars stand as they are; anything else is encoded.
		{"a!#$&+-.^_`|~z", "attachment; filename=\"a!#$&+-.^_`|~z\"; filename*=UTF-8''a!#$&+-.^_`|~z"},
		{"semi;colon,comma", `attachment; filename="semi;colon,comma"; filename*=UTF-8''semi%3Bcolon%2Ccomma`},
		{"tab\there\x7f", `attachment; filename="tab_here_"; filename*=UTF-8''tab%09here%7F`},
		{"", `attachment; filename=""; filename*=UTF-8''`},
	} {
		if got := httpserve.ContentDisposition(tc.name); got != tc.want {
			t.Errorf("%q:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

func TestContentType(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"a.pdf", "application/pdf"},
		{"a.PDF", "application/pdf"}, // case-insensitive where only lower case is known
		{"page.html", "text/html; charset=utf-8"},
		{"page.unknownext", "application/octet-stream"}, // never sniffed
		{"noext", "application/octet-stream"},
	} {
		if got := httpserve.ContentType(tc.name); got != tc.want {
			t.Errorf("ContentType(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestRecorder(t *testing.T) {
	for _, tc := range []struct {
		name       string
		do         func(w http.ResponseWriter)
		status     int
		bytes      int64
		underlying int // the status the client got
	}{
		{"nothing written", func(http.ResponseWriter) {}, 0, 0, 200},
		{"implicit 200", func(w http.ResponseWriter) { io.WriteString(w, "hello") }, 200, 5, 200},
		{"explicit status", func(w http.ResponseWriter) { w.WriteHeader(404); io.WriteString(w, "no") }, 404, 2, 404},
		{"first status wins", func(w http.ResponseWriter) { w.WriteHeader(201); w.WriteHeader(500) }, 201, 0, 201},
		// (httptest's recorder keeps the interim code as its own.)
		{"interim 100 is not the status", func(w http.ResponseWriter) { w.WriteHeader(100); w.WriteHeader(409) }, 409, 0, 100},
		{"flush starts a 200", func(w http.ResponseWriter) { w.(http.Flusher).Flush() }, 200, 0, 200},
		{"through ResponseController", func(w http.ResponseWriter) {
			w.WriteHeader(206)
			io.WriteString(w, "ab")
			if err := http.NewResponseController(w).Flush(); err != nil {
				panic(err)
			}
		}, 206, 2, 206},
	} {
		t.Run(tc.name, func(t *testing.T) {
			under := httptest.NewRecorder()
			rec := &httpserve.Recorder{ResponseWriter: under}
			tc.do(rec)
			if rec.Status() != tc.status || rec.Bytes() != tc.bytes || under.Code != tc.underlying {
				t.Errorf("status %d, bytes %d, sent %d; want %d, %d, %d",
					rec.Status(), rec.Bytes(), under.Code, tc.status, tc.bytes, tc.underlying)
			}
		})
	}
}

func TestMethodLabel(t *testing.T) {
	for m, want := range map[string]string{
		"GET": "GET", "PATCH": "PATCH", "PROPFIND": "PROPFIND", "UNLOCK": "UNLOCK",
		"BREW": "other", "get": "other", "": "other",
	} {
		if got := httpserve.MethodLabel(m); got != want {
			t.Errorf("MethodLabel(%q) = %q, want %q", m, got, want)
		}
	}
}

// TestMetricsSharedAcrossFrontEnds: two front ends built on one registry
// (rest and webdav in the daemon) count into the same families, told apart
// by route; building twice must not panic on the duplicate registration.
func TestMetricsSharedAcrossFrontEnds(t *testing.T) {
	reg := prometheus.NewRegistry()
	logs := &berthtest.LogBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	api := http.NewServeMux()
	api.HandleFunc("GET /api/2/version", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "{}") })
	rest := httpserve.NewMetrics(reg).Observe(log, httpserve.Pattern, api)
	dav := httpserve.NewMetrics(reg).Observe(log, httpserve.Fixed("/webdav/"),
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Context().Err() == nil {
				w.WriteHeader(http.StatusMultiStatus)
			}
		}))

	for _, tc := range []struct {
		h      http.Handler
		method string
		target string
	}{
		{rest, "GET", "/api/2/version"},
		{rest, "GET", "/api/2/nothing"},
		{dav, "PROPFIND", "/webdav/alice/secret-name.txt"},
		{dav, "BREW", "/webdav/"},
	} {
		tc.h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(tc.method, tc.target, nil))
	}
	// A request whose client left before any answer: 499, never sent.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dav.ServeHTTP(httptest.NewRecorder(), httptest.NewRequestWithContext(ctx, "GET", "/webdav/", nil))

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	durations := map[string]uint64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			l := labels(m)
			switch mf.GetName() {
			case "berth_http_requests_total":
				got[l["route"]+" "+l["method"]+" "+l["code"]] += m.GetCounter().GetValue()
			case "berth_http_request_duration_seconds":
				durations[l["route"]] += m.GetHistogram().GetSampleCount()
			}
		}
	}
	want := map[string]float64{
		"GET /api/2/version GET 200": 1,
		"unmatched GET 404":          1,
		"/webdav/ PROPFIND 207":      1,
		"/webdav/ other 207":         1, // an unknown method is not a label of its own
		"/webdav/ GET 499":           1,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("requests:\n got %v\nwant %v", got, want)
	}
	if durations["GET /api/2/version"] != 1 || durations["unmatched"] != 1 || durations["/webdav/"] != 3 {
		t.Errorf("duration samples %v", durations)
	}
	if strings.Contains(logs.String(), "secret-name") {
		t.Errorf("a WebDAV path reached the log:\n%s", logs)
	}
	for _, w := range []string{`route="GET /api/2/version" method=GET status=200 bytes=2`, `route=/webdav/ method=PROPFIND status=207`} {
		if !strings.Contains(logs.String(), w) {
			t.Errorf("log lacks %q:\n%s", w, logs)
		}
	}
	// The help texts and buckets dashboards read.
	for _, mf := range mfs {
		if mf.GetName() == "berth_http_request_duration_seconds" {
			b := mf.GetMetric()[0].GetHistogram().GetBucket()
			if len(b) != 10 || b[0].GetUpperBound() != 0.0005 || b[9].GetUpperBound() != 0.0005*(1<<18) {
				t.Errorf("buckets %v", b)
			}
		}
	}
}

func labels(m *dto.Metric) map[string]string {
	l := map[string]string{}
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}

// failingBody is contents whose reads fail after the first after bytes.
type failingBody struct {
	*bytes.Reader
	after int64
}

var errLost = errors.New("chunk lost")

func (b *failingBody) Read(p []byte) (int, error) {
	off := b.Size() - int64(b.Len())
	if off >= b.after {
		return 0, errLost
	}
	return b.Reader.Read(p[:min(int64(len(p)), b.after-off)])
}

// copyingBody is failingBody sent through httpserve.Copier, as vfs.File
// is: ServeContent's io.CopyN reaches CopyTo (httpserve.ReadFrom), never
// Read.
type copyingBody struct{ failingBody }

func (b *copyingBody) Read([]byte) (int, error) {
	return 0, errors.New("Read called on a body with CopyTo")
}

func (b *copyingBody) CopyTo(w io.Writer, n int64) (int64, error) {
	off := b.Size() - int64(b.Len())
	m, err := io.Copy(w, io.LimitReader(b.Reader, min(n, max(0, b.after-off))))
	if err == nil && m < n && b.Len() > 0 {
		err = errLost
	}
	return m, err
}

// TestAbortAfterFirstByte: a download that fails once its answer has
// started is logged, counted and aborted, so the client sees a broken
// transfer and never a short file with status 200; one that fails before
// gets an error answer. A client that went away is logged at Debug only.
func TestAbortAfterFirstByte(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<14) // 256 KiB, past any buffer
	for _, tc := range []struct {
		name     string
		after    int64 // bytes readable before the error; -1 never fails
		copier   bool  // the body has CopyTo, as vfs.File
		gone     bool  // the handler is told the client left
		status   int   // the status the client sees; 0 for none (a broken connection before the headers)
		complete bool  // the body arrives whole
		aborted  float64
		logged   string
	}{
		{"whole file", -1, false, false, 200, true, 0, ""},
		{"fails after 100 KiB", 100 << 10, false, false, 200, false, 1, "download failed after the response started"},
		{"fails at the first read", 0, false, false, 0, false, 1, "download failed after the response started"},
		{"client gone", 100 << 10, false, true, 200, false, 1, "download stopped: client went away"},
		{"whole file by CopyTo", int64(len(data)), true, false, 200, true, 0, ""},
		{"fails after 100 KiB by CopyTo", 100 << 10, true, false, 200, false, 1, "download failed after the response started"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			logs := &berthtest.LogBuffer{}
			log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			m := httpserve.NewMetrics(reg)
			h := m.Observe(log, httpserve.Fixed("/dl"), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var body io.ReadSeeker = bytes.NewReader(data)
				switch {
				case tc.copier:
					body = &copyingBody{failingBody{Reader: bytes.NewReader(data), after: tc.after}}
				case tc.after >= 0:
					body = &failingBody{Reader: bytes.NewReader(data), after: tc.after}
				}
				s := &httpserve.Stream{ResponseWriter: w}
				err := httpserve.ServeContent(s, r, httpserve.Content{Name: "f.bin", ETag: `"e"`, Body: body})
				if err == nil {
					return
				}
				if !errors.Is(err, errLost) {
					t.Errorf("ServeContent returned %v, want the read error", err)
				}
				if !s.Started() {
					t.Error("a read error before the answer started")
				}
				m.Abort(log, r, "/dl", tc.gone || s.WriteFailed(), err)
				t.Error("Abort returned")
			}))
			srv := httptest.NewServer(h)
			defer srv.Close()

			resp, err := http.Get(srv.URL + "/f.bin")
			var got []byte
			if err == nil {
				got, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			status := 0
			if resp != nil {
				status = resp.StatusCode
			}
			if status != tc.status || (err == nil) != tc.complete || (tc.complete && !bytes.Equal(got, data)) {
				t.Errorf("status %d, %d bytes, error %v; want status %d, complete %v", status, len(got), err, tc.status, tc.complete)
			}
			if n := counter(t, m.AbortedStreams); n != tc.aborted {
				t.Errorf("aborted streams = %v, want %v", n, tc.aborted)
			}
			if tc.logged != "" && !strings.Contains(logs.String(), tc.logged) {
				t.Errorf("log lacks %q:\n%s", tc.logged, logs)
			}
			if tc.gone && strings.Contains(logs.String(), "level=ERROR") {
				t.Errorf("a client that went away was logged as an error:\n%s", logs)
			}
		})
	}
}

// TestServeContentAnswers: the headers of every download, and the errors
// http.ServeContent finds itself handed to the front end's writer (Fail)
// with the body's headers dropped, or left in plain text without one.
func TestServeContentAnswers(t *testing.T) {
	modified := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		fail    bool
		content func(*httpserve.Content) // changes the row's Content; nil: none
		header  []string
		status  int
		body    string
		headers map[string]string // "" means absent
	}{
		{"whole", true, nil, nil, 200, "hello world", map[string]string{
			"Content-Type": "text/plain; charset=utf-8", "ETag": `"v1"`, "X-Content-Type-Options": "nosniff",
			"Cache-Control": "private, no-cache", "Content-Length": "11",
			"Content-Disposition":     `attachment; filename="a b.txt"; filename*=UTF-8''a%20b.txt`,
			"Content-Security-Policy": httpserve.DownloadCSP,
		}},
		// A link's view: inline, sandboxed all the same (an .html shown
		// runs nothing on berth's origin).
		{"inline", true, func(c *httpserve.Content) { c.Inline, c.Name = true, "x.html" }, nil, 200, "hello world", map[string]string{
			"Content-Type": "text/html; charset=utf-8", "Content-Security-Policy": httpserve.DownloadCSP,
			"Content-Disposition": `inline; filename="x.html"; filename*=UTF-8''x.html`,
		}},
		{"a page's own preview", true, func(c *httpserve.Content) { c.Inline, c.CSP = true, "default-src 'none'" }, nil, 200, "hello world", map[string]string{
			"Content-Security-Policy": "default-src 'none'",
		}},
		{"range", true, nil, []string{"Range", "bytes=6-"}, 206, "world", map[string]string{"Content-Range": "bytes 6-10/11"}},
		// ServableRange drops the zero-length suffix part.
		{"range with bytes=-0", true, nil, []string{"Range", "bytes=-0,0-4"}, 206, "hello", nil},
		// If-Range: the ETag resumes; a weak one, or a date, even that
		// of Last-Modified (a second's resolution, which two revisions
		// can share), sends the whole file (ServableRange).
		{"If-Range of the ETag", true, nil, []string{"Range", "bytes=6-", "If-Range", `"v1"`}, 206, "world", map[string]string{"Content-Range": "bytes 6-10/11"}},
		{"If-Range of the weak ETag sends it whole", true, nil, []string{"Range", "bytes=6-", "If-Range", `W/"v1"`}, 200, "hello world", map[string]string{"Content-Range": ""}},
		{"If-Range of another ETag sends it whole", true, nil, []string{"Range", "bytes=6-", "If-Range", `"v0"`}, 200, "hello world", nil},
		{"If-Range of Last-Modified sends it whole", true, nil, []string{"Range", "bytes=6-", "If-Range", modified.Format(http.TimeFormat)}, 200, "hello world", map[string]string{"Content-Range": ""}},
		{"If-Range of another date sends it whole", true, nil, []string{"Range", "bytes=6-", "If-Range", modified.Add(time.Hour).Format(http.TimeFormat)}, 200, "hello world", nil},
		// An empty file is sent whole whatever the Range
		// (DropEmptyRange): a suffix was 206 "bytes 0--1/0".
		{"empty file, suffix", true, func(c *httpserve.Content) { c.Body = strings.NewReader("") }, []string{"Range", "bytes=-5"}, 200, "", map[string]string{"Content-Range": ""}},
		{"empty file, first byte", true, func(c *httpserve.Content) { c.Body = strings.NewReader("") }, []string{"Range", "bytes=0-0"}, 200, "", map[string]string{"Content-Range": ""}},
		// A 304 carries the validator and the caching rule a 200 would
		// (RFC 9110 15.4.5), and nothing of the body.
		{"not modified", true, nil, []string{"If-None-Match", `"v1"`}, 304, "", map[string]string{
			"ETag": `"v1"`, "Cache-Control": "private, no-cache", "Content-Length": "", "Content-Type": "",
		}},
		{"If-None-Match of a list", true, nil, []string{"If-None-Match", `"v0", W/"v1"`}, 304, "", nil},
		{"If-None-Match of *", true, nil, []string{"If-None-Match", `*`}, 304, "", nil},
		{"If-None-Match of another ETag", true, nil, []string{"If-None-Match", `"v0"`}, 200, "hello world", nil},
		// The ETag decides, whatever a date says (RFC 9110 13.2.2).
		{"If-None-Match of another ETag, a later date", true, nil, []string{"If-None-Match", `"v0"`, "If-Modified-Since", modified.Add(time.Hour).Format(http.TimeFormat)}, 200, "hello world", nil},
		{"If-None-Match of the ETag, an earlier date", true, nil, []string{"If-None-Match", `"v1"`, "If-Modified-Since", modified.Add(-time.Hour).Format(http.TimeFormat)}, 304, "", nil},
		// A date proves the contents unchanged only when they were
		// modified before the second it names began (DateConditions):
		// Last-Modified names a second that a later revision may
		// share, and a date in the future is none the contents had.
		{"If-Modified-Since of Last-Modified sends it whole", true, nil, []string{"If-Modified-Since", modified.Format(http.TimeFormat)}, 200, "hello world", nil},
		{"If-Modified-Since of the second a revision was written in sends it whole", true, func(c *httpserve.Content) { c.Modified = modified.Add(999 * time.Millisecond) },
			[]string{"If-Modified-Since", modified.Format(http.TimeFormat)}, 200, "hello world", nil},
		{"If-Modified-Since of an earlier second sends it whole", true, nil, []string{"If-Modified-Since", modified.Add(-time.Second).Format(http.TimeFormat)}, 200, "hello world", nil},
		{"If-Modified-Since of the next second is 304", true, func(c *httpserve.Content) { c.Modified = modified.Add(999 * time.Millisecond) },
			[]string{"If-Modified-Since", modified.Add(time.Second).Format(http.TimeFormat)}, 304, "", map[string]string{"ETag": `"v1"`, "Cache-Control": "private, no-cache"}},
		{"If-Modified-Since in the future sends it whole", true, nil, []string{"If-Modified-Since", time.Now().Add(time.Hour).Format(http.TimeFormat)}, 200, "hello world", nil},
		{"If-Modified-Since that is no date sends it whole", true, nil, []string{"If-Modified-Since", "yesterday"}, 200, "hello world", nil},
		{"If-Unmodified-Since of Last-Modified is 412", true, nil, []string{"If-Unmodified-Since", modified.Format(http.TimeFormat)}, 412, "FAIL 412\n", nil},
		{"If-Unmodified-Since of the second a revision was written in is 412", true, func(c *httpserve.Content) { c.Modified = modified.Add(999 * time.Millisecond) },
			[]string{"If-Unmodified-Since", modified.Format(http.TimeFormat)}, 412, "FAIL 412\n", nil},
		{"If-Unmodified-Since of an earlier second is 412", true, nil, []string{"If-Unmodified-Since", modified.Add(-time.Second).Format(http.TimeFormat)}, 412, "FAIL 412\n", nil},
		{"If-Unmodified-Since of the next second holds", true, func(c *httpserve.Content) { c.Modified = modified.Add(999 * time.Millisecond) },
			[]string{"If-Unmodified-Since", modified.Add(time.Second).Format(http.TimeFormat)}, 200, "hello world", nil},
		{"If-Match of the ETag outweighs If-Unmodified-Since", true, nil, []string{"If-Match", `"v1"`, "If-Unmodified-Since", modified.Add(-time.Hour).Format(http.TimeFormat)}, 200, "hello world", nil},
		{"If-Match of a weak ETag is 412", true, nil, []string{"If-Match", `W/"v1"`}, 412, "FAIL 412\n", nil},
		{"If-Match of *", true, nil, []string{"If-Match", `*`}, 200, "hello world", nil},
		{"zip: no date to compare", true, func(c *httpserve.Content) { c.Modified = time.Time{} }, []string{"If-Unmodified-Since", modified.Add(-time.Hour).Format(http.TimeFormat)}, 200, "hello world", nil},
		{"416 to Fail", true, nil, []string{"Range", "bytes=50-"}, 416, "FAIL 416\n", map[string]string{
			"Content-Range": "bytes */11", "Content-Disposition": "", "Content-Length": "",
		}},
		{"412 to Fail", true, nil, []string{"If-Match", `"other"`}, 412, "FAIL 412\n", map[string]string{"Content-Disposition": ""}},
		{"416 in plain text without Fail", false, nil, []string{"Range", "bytes=50-"}, 416, "invalid range: failed to overlap\n", map[string]string{
			"Content-Type": "text/plain; charset=utf-8",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := httpserve.Content{Name: "a b.txt", ETag: `"v1"`, Modified: modified, Body: strings.NewReader("hello world")}
			if tc.content != nil {
				tc.content(&c)
			}
			if tc.fail {
				c.Fail = func(w http.ResponseWriter, status int) {
					w.WriteHeader(status)
					fmt.Fprintf(w, "FAIL %d\n", status)
				}
			}
			r := httptest.NewRequest("GET", "/", nil)
			for i := 0; i+1 < len(tc.header); i += 2 {
				r.Header.Set(tc.header[i], tc.header[i+1])
			}
			w := httptest.NewRecorder()
			if err := httpserve.ServeContent(w, r, c); err != nil {
				t.Fatal(err)
			}
			if w.Code != tc.status || w.Body.String() != tc.body {
				t.Errorf("%d %q, want %d %q", w.Code, w.Body, tc.status, tc.body)
			}
			for k, v := range tc.headers {
				if got := w.Header().Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

// TestRecover: a panic before the answer is a counted, logged error answer
// written by the front end; after it, the connection is aborted;
// http.ErrAbortHandler passes through uncounted.
func TestRecover(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		status  int // 0: a broken connection
		panics  float64
	}{
		{"before the answer", func(http.ResponseWriter, *http.Request) { panic("boom") }, 500, 1},
		{"after the answer started", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", "100")
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			panic("boom")
		}, 200, 1},
		{"deliberate abort", func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) }, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &berthtest.LogBuffer{}
			log := slog.New(slog.NewTextHandler(logs, nil))
			m := httpserve.NewMetrics(prometheus.NewRegistry())
			fail := func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusInternalServerError)
				io.WriteString(w, "unknown")
			}
			srv := httptest.NewServer(m.Observe(log, httpserve.Fixed("/p"), m.Recover(log, httpserve.Fixed("/p"), fail, tc.handler)))
			defer srv.Close()
			resp, err := http.Get(srv.URL)
			status := 0
			var body []byte
			if err == nil {
				status = resp.StatusCode
				body, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			if status != tc.status {
				t.Errorf("status %d (%v), want %d", status, err, tc.status)
			}
			if tc.status == 500 && string(body) != "unknown" {
				t.Errorf("body %q (%v)", body, err)
			}
			if tc.status == 200 && err == nil {
				t.Error("a panic after the answer started read as a complete body")
			}
			if n := counter(t, m.Panics); n != tc.panics {
				t.Errorf("panics = %v, want %v", n, tc.panics)
			}
			if tc.panics > 0 && !strings.Contains(logs.String(), "handler panic") {
				t.Errorf("panic not logged:\n%s", logs)
			}
		})
	}
}

// counter reads one counter.
func counter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestClientGone: only a cancellation whose request's context is done is
// the client leaving; the same error from a request still open is a
// failure to answer (rest's clientGone and webdav's GET each had it).
func TestClientGone(t *testing.T) {
	open := httptest.NewRequest("GET", "/", nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	gone := open.WithContext(ctx)
	for _, tc := range []struct {
		name string
		r    *http.Request
		err  error
		want bool
	}{
		{"cancelled and gone", gone, context.Canceled, true},
		{"deadline, wrapped, gone", gone, fmt.Errorf("reading: %w", context.DeadlineExceeded), true},
		{"another error while gone", gone, io.ErrUnexpectedEOF, false},
		{"cancelled but still open", open, context.Canceled, false},
	} {
		if got := httpserve.ClientGone(tc.r, tc.err); got != tc.want {
			t.Errorf("%s: ClientGone = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestSendWholeAsServeContent: a GET or HEAD of the whole contents, which
// ServeContent answers without http.ServeContent (SendWhole), gets the
// very answer http.ServeContent gives: the same status, headers and body.
// An If-Range without a Range, which http.ServeContent ignores, sends the
// same request the long way.
func TestSendWholeAsServeContent(t *testing.T) {
	for _, tc := range []struct {
		name     string
		method   string
		modified time.Time
		body     string
		copier   bool
	}{
		{"GET", "GET", time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600)), "hello world", false},
		{"HEAD", "HEAD", time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), "hello world", false},
		{"GET by CopyTo", "GET", time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), "hello world", true},
		{"no modification time", "GET", time.Time{}, "hello world", false},
		{"the Unix epoch", "GET", time.Unix(0, 0), "hello world", false},
		{"empty", "GET", time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), "", false},
		// Last-Modified is kept formatted by second in 256 slots: a
		// second 256 later shares the first rows' slot and must get its
		// own date, as must one before 1970.
		{"a second sharing a kept date's slot", "GET", time.Date(2026, 1, 2, 3, 8, 21, 0, time.UTC), "hello world", false},
		{"the first rows' second again", "GET", time.Date(2026, 1, 2, 3, 4, 5, 999, time.UTC), "hello world", false},
		{"before 1970", "GET", time.Date(1969, 12, 31, 23, 59, 59, 500, time.UTC), "hello world", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			serve := func(hdr ...string) *httptest.ResponseRecorder {
				var body io.ReadSeeker = strings.NewReader(tc.body)
				if tc.copier {
					body = &copyingBody{failingBody{Reader: bytes.NewReader([]byte(tc.body)), after: int64(len(tc.body))}}
				}
				r := httptest.NewRequest(tc.method, "/", nil)
				for i := 0; i+1 < len(hdr); i += 2 {
					r.Header.Set(hdr[i], hdr[i+1])
				}
				w := httptest.NewRecorder()
				if err := httpserve.ServeContent(w, r, httpserve.Content{Name: "a.txt", ETag: `"v1"`, Modified: tc.modified, Body: body}); err != nil {
					t.Fatal(err)
				}
				return w
			}
			fast, long := serve(), serve("If-Range", `"v0"`)
			if fast.Code != long.Code || fast.Body.String() != long.Body.String() {
				t.Errorf("%d %q, http.ServeContent's %d %q", fast.Code, fast.Body, long.Code, long.Body)
			}
			if fmt.Sprint(fast.Header()) != fmt.Sprint(long.Header()) {
				t.Errorf("headers\n%v\nhttp.ServeContent's\n%v", fast.Header(), long.Header())
			}
		})
	}
}

// TestRangeBytes: what a resumption sends, as a share link's limit
// charges it; it may err high, never low.
func TestRangeBytes(t *testing.T) {
	cases := []struct {
		rng  string
		size int64
		want int64
	}{
		{"bytes=1-", 100, 99},
		{"bytes=10-19", 100, 10},
		{"bytes=10-19,50-", 100, 60},
		{"bytes=90-200", 100, 10},
		{"bytes=100-", 100, 0},
		{"bytes=10-5", 100, 0},    // refused, 416: nothing sent (it was counted to the end)
		{"bytes=1-,1-", 100, 100}, // past the content: ServeContent sends it whole
		{"bytes=1-", 0, 0},
		// More parts than httpserve.MaxRanges: ServeContent sends it whole.
		{"bytes=" + strings.Repeat("10-10,", httpserve.MaxRanges) + "10-10", 1000, 1000},
		{"bytes=+10-19", 100, 10}, // ServeContent reads "+10" as 10
	}
	for _, c := range cases {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Range", c.rng)
		if got := httpserve.RangeBytes(r, c.size); got != c.want {
			t.Errorf("RangeBytes(%q, %d) = %d, want %d", c.rng, c.size, got, c.want)
		}
	}
}
