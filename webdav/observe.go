package webdav

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// route is the route label and log field of every WebDAV request: paths
// are the users' names, so they stay out of labels and logs alike.
const route = "/webdav/"

// metrics are the WebDAV requests' share of the HTTP figures. They are the
// families the REST API registers (berth_http_requests_total and
// berth_http_request_duration_seconds), taken over when already registered,
// so one query covers both front ends, told apart by route.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
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
	}
	if reg != nil {
		m.requests = register(reg, m.requests)
		m.duration = register(reg, m.duration)
	}
	return m
}

// register registers c, or returns the collector already registered under
// its name.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		// Anything else is a programming error (a bad metric name).
		panic(fmt.Sprintf("webdav: registering metrics: %v", err))
	}
	return c
}

// methodLabel bounds the method label: clients can send any token.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete,
		http.MethodOptions, "PROPFIND", "PROPPATCH", "MKCOL", "COPY", "MOVE", "LOCK", "UNLOCK":
		return m
	}
	return "other"
}

// statusRecorder remembers the status and size of a response for the
// request's log line and metrics.
type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (rec *statusRecorder) WriteHeader(code int) {
	if rec.status == 0 && code >= 200 {
		rec.status = code
	}
	rec.ResponseWriter.WriteHeader(code)
}

func (rec *statusRecorder) Write(b []byte) (int, error) {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	n, err := rec.ResponseWriter.Write(b)
	rec.bytes += int64(n)
	return n, err
}

// Unwrap gives http.ResponseController the underlying writer.
func (rec *statusRecorder) Unwrap() http.ResponseWriter { return rec.ResponseWriter }

// observe writes one log line and one metric sample per request, as the
// REST API does for its own: the operator's view of WebDAV traffic.
func (h *Handler) observe(w http.ResponseWriter, r *http.Request, serve func(http.ResponseWriter, *http.Request)) {
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w}
	defer func() {
		status := rec.status
		if status == 0 {
			status = http.StatusOK
			if r.Context().Err() != nil {
				status = 499 // the client left before any answer (nginx's convention)
			}
		}
		elapsed := time.Since(start)
		h.metrics.requests.WithLabelValues(route, methodLabel(r.Method), strconv.Itoa(status)).Inc()
		h.metrics.duration.WithLabelValues(route).Observe(elapsed.Seconds())
		h.log.Info("request", "route", route, "method", r.Method, "status", status,
			"bytes", rec.bytes, "duration", elapsed)
	}()
	serve(rec, r)
}
