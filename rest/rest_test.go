package rest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"berth/account"
	"berth/berthtest"
	"berth/httpserve"
	"berth/vfs"
	dto "github.com/prometheus/client_model/go"
)

// testServer builds a server with extra routes registered by add, and
// returns its handler, its log and its registry.
func testServer(t *testing.T, add func(s *server)) (http.Handler, *berthtest.LogBuffer, *prometheus.Registry) {
	t.Helper()
	logs := &berthtest.LogBuffer{}
	reg := prometheus.NewRegistry()
	opts := Options{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), Registerer: reg}
	h := New(opts)
	if add != nil {
		// Rebuild with the extra routes; New's own routes stay.
		s := &server{opts: opts, log: opts.Logger, mux: http.NewServeMux(), metrics: httpserve.NewMetrics(reg)}
		s.opts.Version = APIVersion
		add(s)
		s.routes()
		h = s.observe(s.mux)
	}
	return h, logs, reg
}

func do(t *testing.T, h http.Handler, method, target string) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, target, nil))
	return w
}

func wantJSON(t *testing.T, w *httptest.ResponseRecorder, status int, body string) {
	t.Helper()
	if w.Code != status {
		t.Errorf("status = %d, want %d (body %s)", w.Code, status, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	if got := strings.TrimSpace(w.Body.String()); got != body {
		t.Errorf("body = %s, want %s", got, body)
	}
}

func TestVersion(t *testing.T) {
	h, logs, reg := testServer(t, nil)
	wantJSON(t, do(t, h, "GET", "/api/2/version"), 200, `{"version":"2.0.0"}`)

	custom := New(Options{Version: "2.1.3"})
	wantJSON(t, do(t, custom, "GET", "/api/2/version"), 200, `{"version":"2.1.3"}`)

	line := logs.String()
	for _, want := range []string{`route="GET /api/2/version"`, "method=GET", "status=200", "bytes=20", "duration="} {
		if !strings.Contains(line, want) {
			t.Errorf("log %q lacks %q", line, want)
		}
	}
	if n := counterValue(t, must(t, reg)(`GET /api/2/version`, "GET", "200")); n != 1 {
		t.Errorf("requests counter = %v, want 1", n)
	}
}

// counterValue reads one counter.
func counterValue(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 1)
	c.Collect(ch)
	var m dto.Metric
	if err := (<-ch).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// must returns the requests counter of reg's REST metrics.
func must(t *testing.T, reg *prometheus.Registry) func(route, method, code string) prometheus.Collector {
	t.Helper()
	m := httpserve.NewMetrics(reg) // returns the already registered collectors
	return func(route, method, code string) prometheus.Collector {
		return m.Requests.WithLabelValues(route, method, code)
	}
}

// TestUnroutedRequests checks what no route serves (issue 12): it goes
// through the error table, JSON like every answer. Once a catch-all 404
// for everything, wrong methods included (TestUnknownRouteIsJSON404): now
// an unknown /api/2 path without a valid token answers the very 401 a real
// route does, so an anonymous caller cannot map the routes, and a known
// path with another method answers 405 with Allow, after the token where
// the path's routes take one.
func TestUnroutedRequests(t *testing.T) {
	f := newFixture(t)
	const (
		none = ""
		bad  = "not-a-token"
	)
	good := f.token
	notFound := `{"error":"not_found"}`
	noToken := `{"error":"access_denied","error_description":"an access token is required: Authorization: Bearer \u003ctoken\u003e"}`
	badToken := `{"error":"access_denied","error_description":"the access token is invalid or expired"}`
	only := func(allow string) string {
		return `{"error":"invalid_request","error_description":"this path answers only ` + allow + `"}`
	}
	rows := []struct {
		name          string
		method, path  string
		token         string
		status        int
		allow, body   string
		sameAsPersonG bool // byte for byte GET /api/2/person's answer with the same token
	}{
		// Unknown paths under /api/2: the token first.
		{"unknown path, no token", "GET", "/api/2/nothing/here", none, 401, "", noToken, true},
		{"unknown path, bad token", "GET", "/api/2/nothing/here", bad, 401, "", badToken, true},
		// The old catch-all's row, now behind a valid token.
		{"unknown path, good token", "GET", "/api/2/nothing/here", good, 404, "", notFound, false},
		{"unknown /api/2 itself, no token", "GET", "/api/2", none, 401, "", noToken, true},
		{"unknown POST path, no token", "POST", "/api/2/nothing", none, 401, "", noToken, true},
		// GET /api/2/files/{root}/{item}/{sub} serves only folder/x and
		// x/download; any other pair is an unknown path too.
		{"unknown item sub, no token", "GET", f.at("/api/2/files/%d/1/nothing"), none, 401, "", noToken, true},
		{"unknown item sub, good token", "GET", f.at("/api/2/files/%d/1/nothing"), good, 404, "", notFound, false},
		// Other methods there were a 405 naming GET, which answers 404.
		{"unknown item sub, PUT, no token", "PUT", f.at("/api/2/files/%d/1/nothing"), none, 401, "", noToken, true},
		{"unknown item sub, PUT, good token", "PUT", f.at("/api/2/files/%d/1/nothing"), good, 404, "", notFound, false},
		{"unknown item sub, HEAD, good token", "HEAD", f.at("/api/2/files/%d/1/nothing"), good, 404, "", "", false},
		{"folder, POST, good token", "POST", f.at("/api/2/files/%d/folder/1"), good, 405, "GET, HEAD", only("GET, HEAD"), false},
		{"download, PUT, good token", "PUT", f.at("/api/2/files/%d/1/download"), good, 405, "GET, HEAD", only("GET, HEAD"), false},
		// Outside /api/2 no route takes a token: a 401 would say one helps.
		{"unknown oauth path, no token", "GET", "/oauth/nothing", none, 404, "", notFound, false},
		{"unknown top path, no token", "GET", "/nothing", none, 404, "", notFound, false},

		// Known paths, other methods: routes that take a token check it first.
		{"PUT person, no token", "PUT", "/api/2/person", none, 401, "", noToken, true},
		{"PUT person, bad token", "PUT", "/api/2/person", bad, 401, "", badToken, true},
		{"PUT person, good token", "PUT", "/api/2/person", good, 405, "GET, HEAD", only("GET, HEAD"), false},
		{"OPTIONS person, good token", "OPTIONS", "/api/2/person", good, 405, "GET, HEAD", only("GET, HEAD"), false},
		{"POST file, no token", "POST", f.at("/api/2/files/%d/1"), none, 401, "", noToken, true},
		{"POST file, good token", "POST", f.at("/api/2/files/%d/1"), good, 405, "GET, HEAD", only("GET, HEAD"), false},
		// GET {root}/{file_id} and POST {root}/lock share the path.
		{"PUT lock, good token", "PUT", f.at("/api/2/files/%d/lock"), good, 405, "GET, HEAD, POST", only("GET, HEAD, POST"), false},
		{"GET upload-to-folder, good token", "GET", f.at("/api/2/files/%d/folder/1/upload"), good, 405, "POST", only("POST"), false},
		// Public routes answer 405 at once, whatever the token. DELETE
		// /api/2/version was the old catch-all's 404.
		{"DELETE version, no token", "DELETE", "/api/2/version", none, 405, "GET, HEAD", only("GET, HEAD"), false},
		{"DELETE version, good token", "DELETE", "/api/2/version", good, 405, "GET, HEAD", only("GET, HEAD"), false},
		{"GET oauth token, no token", "GET", "/oauth/token", none, 405, "POST", only("POST"), false},
		{"GET oauth revoke, bad token", "GET", "/oauth/revoke", bad, 405, "POST", only("POST"), false},
		{"HEAD oauth token, no token", "HEAD", "/oauth/token", none, 405, "POST", "", false},

		// HEAD is served wherever GET is.
		{"HEAD person, good token", "HEAD", "/api/2/person", good, 200, "", "", false},
		{"HEAD version, no token", "HEAD", "/api/2/version", none, 200, "", "", false},
	}
	// answer is a response without its Date, which may tick between two.
	type answer struct {
		status int
		header http.Header
		body   string
	}
	get := func(method, path, token string) answer {
		resp := f.request(method, path, token, nil, nil)
		st, b := f.readAll(resp)
		resp.Header.Del("Date")
		return answer{st, resp.Header, string(b)}
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			got := get(row.method, row.path, row.token)
			if got.status != row.status {
				t.Errorf("status = %d, want %d (body %s)", got.status, row.status, got.body)
			}
			if a := got.header.Get("Allow"); a != row.allow {
				t.Errorf("Allow = %q, want %q", a, row.allow)
			}
			if ct := got.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			if row.method != "HEAD" {
				if b := strings.TrimSpace(got.body); b != row.body {
					t.Errorf("body = %s, want %s", b, row.body)
				}
			} else if got.body != "" {
				t.Errorf("HEAD answered a body: %q", got.body)
			}
			if row.sameAsPersonG {
				real := get("GET", "/api/2/person", row.token)
				if !reflect.DeepEqual(got, real) {
					t.Errorf("answer differs from a real route's:\n got %+v\nreal %+v", got, real)
				}
			}
			if want := fmt.Sprintf("status=%d", row.status); !strings.Contains(f.logs.String(), want) {
				t.Errorf("%s not logged: %s", want, f.logs)
			}
		})
	}
}

func TestInsecureHandler(t *testing.T) {
	for _, m := range []string{"GET", "POST", "PROPFIND"} {
		wantJSON(t, do(t, InsecureHandler(), m, "/api/2/version"), 400,
			`{"error":"insecure_transport","error_description":"requests must use HTTPS"}`)
	}
}

var errSecret = errors.New("disk /dev/sda1 on fire")

func TestErrorMapping(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int
		body   string
	}{
		{"bare", ErrForbidden, 403, `{"error":"forbidden"}`},
		{"wrapped", fmt.Errorf("checking: %w", ErrAccessDenied), 401, `{"error":"access_denied"}`},
		{"described", Describe(ErrInvalidRequest, "missing parameter %q", "name"), 400,
			`{"error":"invalid_request","error_description":"missing parameter \"name\""}`},
		{"default description", ErrNoFileReceived, 400, `{"error":"no_file_received","error_description":"the file ` + "`file`" + ` is missing"}`},
		{"date", ErrInvalidDateFormat, 400, `{"error":"invalid_date_format","error_description":"dates must be formatted YYYY-MM-DD"}`},
		{"unavailable", ErrUnavailable, 503, `{"error":"temporarily_unavailable","error_description":"the service is temporarily unavailable"}`},
		{"too large", &http.MaxBytesError{Limit: 10}, 400, `{"error":"invalid_request","error_description":"request body too large"}`},
		// Domain rows: only the code is pinned here, their default
		// descriptions belong to the route authors.
		{"vfs", fmt.Errorf("open: %w", vfs.ErrRootDeleted), 410, `root_deleted`},
		{"vfs conflict", vfs.ErrNameConflict, 409, `name_conflict`},
		{"described domain error", Describe(vfs.ErrNameConflict, "taken"), 409, `{"error":"name_conflict","error_description":"taken"}`},
		{"account field", &account.FieldError{Field: "email", Reason: "not an address"}, 400,
			`{"error":"invalid_request","error_description":"email: not an address"}`},
		{"account inactive", account.ErrInactive, 403, `forbidden`},
		{"account exists", account.ErrExists, 409, `name_conflict`},
		{"user limit", account.ErrUserLimitExceeded, 409, `user_limit_exceeded`},
		{"unknown", fmt.Errorf("reading: %w", errSecret), 500, `{"error":"unknown"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, logs, _ := testServer(t, func(s *server) {
				s.handle("GET /fail", func(*http.Request) (any, error) { return nil, tt.err })
			})
			w := do(t, h, "GET", "/fail")
			if !strings.HasPrefix(tt.body, "{") {
				var got errorBody
				if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != tt.status || got.Error != tt.body {
					t.Fatalf("got %d %s, want %d with error %q", w.Code, w.Body, tt.status, tt.body)
				}
				return
			}
			wantJSON(t, w, tt.status, tt.body)
			if tt.status == 500 && !strings.Contains(logs.String(), "on fire") {
				t.Errorf("unknown error's detail not logged: %s", logs)
			}
		})
	}
}

func TestJSONSuccess(t *testing.T) {
	h, _, _ := testServer(t, func(s *server) {
		s.handle("POST /ok", func(*http.Request) (any, error) { return nil, nil })
		s.handle("GET /items/{id}", func(r *http.Request) (any, error) {
			return map[string]string{"id": r.PathValue("id")}, nil
		})
		s.handle("GET /bad", func(*http.Request) (any, error) { return func() {}, nil })
	})
	wantJSON(t, do(t, h, "POST", "/ok"), 200, `{"status":"ok"}`)
	wantJSON(t, do(t, h, "GET", "/items/42"), 200, `{"id":"42"}`)
	wantJSON(t, do(t, h, "GET", "/bad"), 500, `{"error":"unknown"}`)
}

func TestCancelledClientGetsNoBody(t *testing.T) {
	h, _, _ := testServer(t, func(s *server) {
		s.handle("GET /slow", func(r *http.Request) (any, error) {
			<-r.Context().Done()
			return nil, fmt.Errorf("waiting: %w", r.Context().Err())
		})
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequestWithContext(ctx, "GET", "/slow", nil))
	if w.Body.Len() != 0 {
		t.Fatalf("cancelled client got a body: %s", w.Body)
	}
}

func TestPanicRecovered(t *testing.T) {
	h, logs, _ := testServer(t, func(s *server) {
		s.handle("GET /panic", func(*http.Request) (any, error) { panic("boom") })
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	for range 2 { // the server survives the first panic
		resp, err := http.Get(srv.URL + "/panic")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 500 || strings.TrimSpace(string(b)) != `{"error":"unknown"}` {
			t.Fatalf("panic answered %d %s", resp.StatusCode, b)
		}
	}
	if !strings.Contains(logs.String(), "boom") || !strings.Contains(logs.String(), "rest_test.go") {
		t.Errorf("panic not logged with its stack: %s", logs)
	}
	resp, err := http.Get(srv.URL + "/api/2/version")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("server down after panic: %v", err)
	}
	resp.Body.Close()
}

func TestStreams(t *testing.T) {
	h, logs, reg := testServer(t, func(s *server) {
		s.handleStream("GET /early", func(w http.ResponseWriter, r *http.Request) error {
			w.Header().Set("Content-Length", "100")
			w.Header().Set("Content-Disposition", "attachment")
			return Describe(ErrNotFound, "no such file")
		})
		s.handleStream("GET /late", func(w http.ResponseWriter, r *http.Request) error {
			w.Header().Set("Content-Length", "100000")
			if _, err := w.Write(make([]byte, 10)); err != nil {
				return err
			}
			http.NewResponseController(w).Flush()
			return errSecret
		})
		s.handleStream("GET /whole", func(w http.ResponseWriter, r *http.Request) error {
			http.ServeContent(w, r, "f.txt", time.Time{}, strings.NewReader("hello world"))
			return nil
		})
		s.handle("GET /abort", func(*http.Request) (any, error) { panic(http.ErrAbortHandler) })
	})
	srv := httptest.NewServer(h)
	defer srv.Close()

	get := func(path string, hdr ...string) (*http.Response, []byte, error) {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp, b, err
	}

	resp, b, err := get("/early")
	if err != nil || resp.StatusCode != 404 || strings.TrimSpace(string(b)) != `{"error":"not_found","error_description":"no such file"}` ||
		resp.Header.Get("Content-Disposition") != "" {
		t.Fatalf("early error: %v %v %s %v", err, resp.StatusCode, b, resp.Header)
	}

	_, _, err = get("/late")
	if err == nil {
		t.Fatal("a download that failed midway read as complete")
	}
	if !strings.Contains(logs.String(), "on fire") {
		t.Errorf("late error not logged: %s", logs)
	}
	if n := counterValue(t, httpserve.NewMetrics(reg).AbortedStreams); n != 1 {
		t.Errorf("aborted streams = %v, want 1", n)
	}

	resp, b, err = get("/whole", "Range", "bytes=6-")
	if err != nil || resp.StatusCode != 206 || string(b) != "world" {
		t.Fatalf("range download: %v %v %q", err, resp.StatusCode, b)
	}

	if _, _, err = get("/abort"); err == nil {
		t.Fatal("ErrAbortHandler did not abort the connection")
	}
}
