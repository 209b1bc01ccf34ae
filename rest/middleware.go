package rest

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"berth/httpserve"
)

// metrics are the HTTP figures every front end shares (httpserve), built
// once per registry: a WebDAV handler on the same registry counts into the
// same families, told apart by route.
type metrics struct {
	*httpserve.Metrics
	// requests and abortedStreams name two of the families as rest's
	// tests read them.
	requests       *prometheus.CounterVec
	abortedStreams prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := httpserve.NewMetrics(reg)
	return &metrics{Metrics: m, requests: m.Requests, abortedStreams: m.AbortedStreams}
}

// observe wraps the whole API: one log line and one metric sample per
// request, labelled with the route pattern, and panics recovered as a
// logged 500 unknown.
func (s *server) observe(next http.Handler) http.Handler {
	return s.metrics.Observe(s.log, httpserve.Pattern, s.metrics.Recover(s.log, httpserve.Pattern, panicked, next))
}

// panicked answers a request whose handler panicked before writing.
func panicked(w http.ResponseWriter, _ *http.Request) {
	writeErrorBody(w, http.StatusInternalServerError, errorBody{Error: "unknown"})
}
