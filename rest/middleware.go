package rest

import (
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the HTTP figures of the REST front end. Labels are bounded:
// route patterns, a fixed set of methods, and status codes.
type metrics struct {
	requests       *prometheus.CounterVec
	duration       *prometheus.HistogramVec
	abortedStreams prometheus.Counter
	panics         prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_http_requests_total",
			Help: "HTTP requests served, by route (a REST API route pattern, or /webdav/), method and status.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "berth_http_request_duration_seconds",
			Help:    "Time to serve an HTTP request, by route (a REST API route pattern, or /webdav/).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"route"}),
		abortedStreams: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_http_aborted_streams_total",
			Help: "Downloads aborted by an error after the response had started.",
		}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_http_panics_total",
			Help: "Handler panics recovered by the REST API.",
		}),
	}
	m.requests = register(reg, m.requests)
	m.duration = register(reg, m.duration)
	m.abortedStreams = register(reg, m.abortedStreams)
	m.panics = register(reg, m.panics)
	return m
}

// register registers c, or returns the collector already registered under
// its name, so two handlers built on one registry share their figures.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		// Anything else is a programming error (a bad metric name).
		panic(fmt.Sprintf("rest: registering metrics: %v", err))
	}
	return c
}

// recorder remembers the status and size of a response for the log line.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (rec *recorder) WriteHeader(code int) {
	if rec.status == 0 && code >= 200 {
		rec.status = code
	}
	rec.ResponseWriter.WriteHeader(code)
}

func (rec *recorder) Write(b []byte) (int, error) {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	n, err := rec.ResponseWriter.Write(b)
	rec.bytes += int64(n)
	return n, err
}

// Flush lets streaming handlers push buffered bytes.
func (rec *recorder) Flush() {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	_ = http.NewResponseController(rec.ResponseWriter).Flush()
}

// Unwrap gives http.ResponseController the underlying writer.
func (rec *recorder) Unwrap() http.ResponseWriter { return rec.ResponseWriter }

// statusClientClosed is logged for a request whose client left before any
// answer (nginx's convention); it is never sent.
const statusClientClosed = 499

// observe wraps the whole API: it recovers panics and writes one log line
// and one metric sample per request.
func (s *server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w}
		defer func() {
			// ServeMux sets r.Pattern on this same request when it routes.
			route := r.Pattern
			if route == "" {
				route = "unmatched"
			}
			status := rec.status
			if status == 0 {
				status = http.StatusOK
				if r.Context().Err() != nil {
					status = statusClientClosed
				}
			}
			elapsed := time.Since(start)
			s.metrics.requests.WithLabelValues(route, methodLabel(r.Method), strconv.Itoa(status)).Inc()
			s.metrics.duration.WithLabelValues(route).Observe(elapsed.Seconds())
			s.log.Info("request", "route", route, "method", r.Method, "status", status,
				"bytes", rec.bytes, "duration", elapsed)
		}()
		s.recoverPanics(next).ServeHTTP(rec, r)
	})
}

// recoverPanics turns a handler panic into a logged 500 unknown, so one bad
// request never takes the daemon down. http.ErrAbortHandler is passed on:
// it is the deliberate way to break a connection mid-download.
func (s *server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			p := recover()
			if p == nil {
				return
			}
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.metrics.panics.Inc()
			s.log.Error("handler panic", "route", r.Pattern, "method", r.Method,
				"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			if rec, ok := w.(*recorder); ok && rec.status != 0 {
				// Too late for an error body; break the connection instead.
				panic(http.ErrAbortHandler)
			}
			writeErrorBody(w, http.StatusInternalServerError, errorBody{Error: "unknown"})
		}()
		next.ServeHTTP(w, r)
	})
}

// methodLabel bounds the method label: clients can send any token.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}
