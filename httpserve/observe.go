// Package httpserve is what every front end does the same when it serves
// HTTP: one set of request metrics and the log line of each request, the
// status-recording ResponseWriter they read, panic recovery, and the
// download half (http.ServeContent with berth's headers,
// Content-Disposition, and the rule that a download failing after its first
// byte is logged, counted and aborted). rest, webdav and web import it; it
// imports vfs and nothing else of berth's.
package httpserve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the HTTP figures of every front end. One set of families
// serves them all, told apart by the route label, so one query covers REST
// and WebDAV alike. Labels are bounded: route names chosen by the front
// ends (never paths), a fixed set of methods, and status codes.
type Metrics struct {
	// Requests counts requests served, by route, method and status.
	Requests *prometheus.CounterVec
	// Duration is the time to serve a request, by route.
	Duration *prometheus.HistogramVec
	// AbortedStreams counts downloads aborted after their first byte.
	AbortedStreams prometheus.Counter
	// Panics counts handler panics recovered (Recover).
	Panics prometheus.Counter

	// series holds the children of Requests and Duration by label values
	// (seriesKey to *series). WithLabelValues checks, hashes and looks
	// up its labels on every call, which on a 4 KiB GET was a few per cent
	// of the request; the labels are bounded, so the map is too.
	series sync.Map
}

// seriesKey is the label values of one request's figures.
type seriesKey struct {
	route, method string
	code          int
}

// series is the children of Requests and Duration for one seriesKey.
type series struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

// seriesOf returns the figures of k, made on first use.
func (m *Metrics) seriesOf(k seriesKey) *series {
	if s, ok := m.series.Load(k); ok {
		return s.(*series)
	}
	s := &series{
		requests: m.Requests.WithLabelValues(k.route, k.method, strconv.Itoa(k.code)),
		duration: m.Duration.WithLabelValues(k.route),
	}
	got, _ := m.series.LoadOrStore(k, s)
	return got.(*series)
}

// NewMetrics builds the HTTP families and registers them with reg. A family
// already registered there (by the other front end built on the same
// registry) is taken over, so both count into one. A nil reg leaves them
// unregistered.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_http_requests_total",
			Help: "HTTP requests served, by route (a REST API or share-link page route pattern, or /webdav/), method and status.",
		}, []string{"route", "method", "code"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "berth_http_request_duration_seconds",
			Help:    "Time to serve an HTTP request, by route (a REST API or share-link page route pattern, or /webdav/).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"route"}),
		AbortedStreams: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_http_aborted_streams_total",
			Help: "Downloads aborted by an error after the response had started.",
		}),
		Panics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_http_panics_total",
			Help: "Handler panics recovered by the REST API.",
		}),
	}
	if reg != nil {
		m.Requests = register(reg, m.Requests)
		m.Duration = register(reg, m.Duration)
		m.AbortedStreams = register(reg, m.AbortedStreams)
		m.Panics = register(reg, m.Panics)
	}
	return m
}

// register registers c, or returns the collector already registered under
// its name, so two front ends built on one registry share their figures.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		// Anything else is a programming error (a bad metric name).
		panic(fmt.Sprintf("httpserve: registering metrics: %v", err))
	}
	return c
}

// MethodLabel bounds the method label: clients can send any token. The
// methods of every front end are kept; anything else is "other".
func MethodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions,
		"PROPFIND", "PROPPATCH", "MKCOL", "COPY", "MOVE", "LOCK", "UNLOCK":
		return m
	}
	return "other"
}

// StatusClientClosed is logged and counted for a request whose client left
// before any answer (nginx's convention); it is never sent.
const StatusClientClosed = 499

// Fixed is a route function that names every request alike: a front end
// whose paths are users' names keeps them out of labels and logs.
func Fixed(name string) func(*http.Request) string {
	return func(*http.Request) string { return name }
}

// Pattern is a route function for a handler behind an http.ServeMux: the
// pattern that served the request, or "unmatched". ServeMux sets r.Pattern
// on the request it routes, which is the one Observe holds.
func Pattern(r *http.Request) string {
	if r.Pattern == "" {
		return "unmatched"
	}
	return r.Pattern
}

// Observe wraps next with the operator's view of each request: one log line
// and one metric sample, labelled with route(r), read once next is done.
// next is handed a *Recorder.
func (m *Metrics) Observe(log *slog.Logger, route func(*http.Request) string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &Recorder{ResponseWriter: w}
		defer func() {
			// Runs on a panic too (an aborted download), before net/http sees it.
			rt := route(r)
			status := rec.status
			if status == 0 {
				status = http.StatusOK
				if r.Context().Err() != nil {
					status = StatusClientClosed
				}
			}
			elapsed := time.Since(start)
			s := m.seriesOf(seriesKey{rt, MethodLabel(r.Method), status})
			s.requests.Inc()
			s.duration.Observe(elapsed.Seconds())
			// Asked first: the arguments would be boxed (allocated)
			// before slog finds the line is not wanted, as it is not at
			// the level a busy server runs at.
			if log.Enabled(r.Context(), slog.LevelInfo) {
				log.Info("request", "route", rt, "method", r.Method, "status", status,
					"bytes", rec.bytes, "duration", elapsed)
			}
		}()
		next.ServeHTTP(rec, r)
	})
}

// Recover turns a panic of next into a logged and counted error answer,
// written by fail, so one bad request never takes the daemon down. Once
// the response has started (as a Recorder below it saw) there is no answer
// left to write and the connection is aborted instead.
// http.ErrAbortHandler is passed on: it is the deliberate way to break a
// connection mid-download.
func (m *Metrics) Recover(log *slog.Logger, route func(*http.Request) string, fail http.HandlerFunc, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			p := recover()
			if p == nil {
				return
			}
			if p == http.ErrAbortHandler {
				panic(p)
			}
			m.Panics.Inc()
			log.Error("handler panic", "route", route(r), "method", r.Method,
				"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			if started(w) {
				panic(http.ErrAbortHandler)
			}
			fail(w, r)
		}()
		next.ServeHTTP(w, r)
	})
}

// started reports whether the Recorder in w's chain of writers has seen a
// status; without one it cannot tell, and says no.
func started(w http.ResponseWriter) bool {
	for {
		switch v := w.(type) {
		case *Recorder:
			return v.status != 0
		case interface{ Unwrap() http.ResponseWriter }:
			w = v.Unwrap()
		default:
			return false
		}
	}
}

// A Charge is what an answer was charged before it sent a byte
// (share.Charge): once the answer has ended, Settle is told how many
// bytes it sent, to give back the rest.
type Charge interface {
	Reserved() bool
	Settle(ctx context.Context, sent int64) error
}

// Charged returns w wrapped to count what the answer sends, and settle,
// which the caller defers: it settles c with that count once the answer
// has ended. A failure is logged with args (the charge then stays whole,
// which errs against the link's user only). Where c reserved nothing, w
// is returned as it is.
func Charged(w http.ResponseWriter, r *http.Request, c Charge, log *slog.Logger, args ...any) (_ http.ResponseWriter, settle func()) {
	if !c.Reserved() {
		return w, func() {}
	}
	rec := &Recorder{ResponseWriter: w}
	return rec, func() {
		if err := c.Settle(r.Context(), rec.Bytes()); err != nil {
			log.Warn("share link: could not give back what an answer did not send", append(args, "error", err)...)
		}
	}
}

// Recorder remembers the status and size of a response for the request's
// log line and metrics.
type Recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

// Status is the status sent, 0 while none is.
func (rec *Recorder) Status() int { return rec.status }

// Bytes is the size of the body written so far.
func (rec *Recorder) Bytes() int64 { return rec.bytes }

// WriteHeader records the first final status (1xx answers are interim).
func (rec *Recorder) WriteHeader(code int) {
	if rec.status == 0 && code >= 200 {
		rec.status = code
	}
	rec.ResponseWriter.WriteHeader(code)
}

// Write records the implicit 200 and the bytes written.
func (rec *Recorder) Write(b []byte) (int, error) {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	n, err := rec.ResponseWriter.Write(b)
	rec.bytes += int64(n)
	return n, err
}

// Flush lets streaming handlers push buffered bytes.
func (rec *Recorder) Flush() {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	_ = http.NewResponseController(rec.ResponseWriter).Flush()
}

// Unwrap gives http.ResponseController the underlying writer.
func (rec *Recorder) Unwrap() http.ResponseWriter { return rec.ResponseWriter }
