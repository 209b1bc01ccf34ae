package rest

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"berth/account"
	"berth/httpserve"
)

// JSONHandler serves a JSON endpoint: it returns the value to encode, or an
// error for the adapter to map through errorTable. A nil value with a nil
// error is a bare success, {"status":"ok"}.
type JSONHandler func(*http.Request) (any, error)

// StreamHandler serves a download. It writes the body itself (usually with
// http.ServeContent). An error returned before anything was written becomes
// a JSON error response; after that it aborts the connection, so the client
// sees a broken transfer instead of a short file with status 200.
type StreamHandler func(http.ResponseWriter, *http.Request) error

// statusBody is a bare success, spec 1.3.
type statusBody struct {
	Status string `json:"status"`
}

// serveJSON adapts a JSONHandler to net/http.
func (s *server) serveJSON(h JSONHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := r.Body
		v, err := h(r)
		if err != nil {
			if stall, ok := body.(interface{ Stalled() error }); ok && stall.Stalled() != nil {
				// Whatever the handler made of the failed read (a
				// malformed form, a cancelled context: net/http
				// cancels it on any read error), the cause is the
				// stall, and the client is still there to be told.
				err = stall.Stalled()
			}
			s.writeError(w, r, err)
			return
		}
		if v == nil {
			v = statusBody{Status: "ok"}
		}
		// Marshal before writing, so an unencodable value is still a clean
		// 500 rather than a half-written body.
		b, err := json.Marshal(v)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeBody(w, http.StatusOK, b)
	})
}

// serveStream adapts a StreamHandler to net/http.
func (s *server) serveStream(h StreamHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tw := &httpserve.Stream{ResponseWriter: w}
		err := h(tw, r)
		if err == nil {
			return
		}
		if !tw.Started() {
			s.writeError(w, r, err)
			return
		}
		s.metrics.Abort(s.log, r, r.Pattern, httpserve.ClientGone(r, err) || tw.WriteFailed(), err)
	})
}

// writeError answers err through errorTable. A client that went away gets
// nothing; an unknown error is logged with its detail and answered with a
// bare 500 unknown.
func (s *server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if httpserve.ClientGone(r, err) {
		s.log.Debug("request cancelled by the client", "route", r.Pattern, "error", err)
		return
	}
	status, body, known := classify(err)
	if !known {
		s.log.Error("request failed", "route", r.Pattern, "method", r.Method, "error", err)
	} else if status >= 500 {
		s.log.Warn("request failed", "route", r.Pattern, "method", r.Method, "status", status, "error", err)
	}
	if d, ok := account.RetryAfter(err); ok {
		// RFC 9110 10.2.3: a lock's or throttle's time left, or a
		// moment for a full sign-in queue, in whole seconds rounded up.
		w.Header().Set("Retry-After", strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10))
	}
	var mna *methodNotAllowed
	if errors.As(err, &mna) {
		// RFC 9110 15.5.6: a 405 names the methods the path serves.
		w.Header().Set("Allow", strings.Join(mna.allow, ", "))
	}
	switch {
	case status != http.StatusUnauthorized:
	case body.Error == "access_denied":
		w.Header().Set("WWW-Authenticate", bearerChallenge(r))
	case body.Error == "invalid_client":
		// RFC 6749 5.2: the scheme a client may authenticate with
		// (2.3.1), which one that tried it must be answered with.
		w.Header().Set("WWW-Authenticate", `Basic realm="berth"`)
	}
	writeErrorBody(w, status, body)
}

// bearerChallenge is the WWW-Authenticate of a 401 access_denied: RFC
// 9110 15.5.2 has every 401 name a scheme that would do, and RFC 6750 3
// the bearer scheme's; error="invalid_token" only when a bearer token was
// sent and refused (RFC 6750 3.1: not for a request without one).
func bearerChallenge(r *http.Request) string {
	if _, ok := bearer(r); ok {
		return `Bearer realm="berth", error="invalid_token"`
	}
	return `Bearer realm="berth"`
}

// writeErrorBody writes an error response, first dropping headers a
// download handler may have set for the body it never sent.
func writeErrorBody(w http.ResponseWriter, status int, body errorBody) {
	h := w.Header()
	for _, k := range []string{"Content-Length", "Content-Encoding", "Content-Disposition", "Content-Range", "Etag", "Last-Modified", "Accept-Ranges"} {
		h.Del(k)
	}
	writeBody(w, status, body.json())
}

// json is the encoded body.
func (body errorBody) json() []byte {
	b, err := json.Marshal(body)
	if err != nil {
		// Two strings always marshal; keep the compiler honest anyway.
		b = []byte(`{"error":"unknown"}`)
	}
	return b
}

// writeBody writes a complete JSON body.
func writeBody(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	// A failed write means the client is gone; there is no one to tell.
	_, _ = w.Write(append(b, '\n'))
}

// discardLogger is the logger of Options without one.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
