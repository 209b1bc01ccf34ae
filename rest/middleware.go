package rest

import (
	"net/http"

	"berth/httpserve"
)

// observe wraps the whole API: one log line and one metric sample per
// request, labelled with the route pattern, and panics recovered as a
// logged 500 unknown.
func (s *server) observe(next http.Handler) http.Handler {
	return s.metrics.Observe(s.log, httpserve.Pattern, s.metrics.Recover(s.log, httpserve.Pattern, panicked, next))
}

// panicked answers a request whose handler panicked before writing,
// through the error table like every other error answer.
func panicked(w http.ResponseWriter, _ *http.Request) {
	status, body, _ := classify(errPanicked)
	writeErrorBody(w, status, body)
}
