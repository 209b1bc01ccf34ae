package daemon

import (
	"context"
	"errors"
	"net/http"
	"time"

	"berth/kv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// newRegistry returns the process's metrics registry with the Go runtime
// and process collectors; the packages add theirs through the
// prometheus.Registerer they are handed.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// metricsHandler serves /metrics from reg and /health from db; the
// metrics listener serves nothing else.
func metricsHandler(reg *prometheus.Registry, db kv.Store) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.Handle("GET /health", healthHandler(db))
	return mux
}

// healthTimeout bounds the read /health makes: a load balancer's check
// must get an answer within its own interval.
const healthTimeout = 2 * time.Second

// healthHandler answers 200 "ok" while the metadata store takes reads and
// has not stopped writes (kv.Failer), else 503 with the reason: a load
// balancer in front of several nodes (docs/operations.md "Running several
// nodes") sends requests only to nodes that can serve them. It reads one
// key, so it also answers for the database behind a shared store.
func healthHandler(db kv.Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		err := failed(db)
		if err == nil {
			ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
			defer cancel()
			err = db.View(ctx, func(tx kv.Txn) error {
				_, err := tx.Get([]byte("health"))
				if errors.Is(err, kv.ErrNotFound) {
					return nil
				}
				return err
			})
		}
		if err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte("unavailable: " + err.Error() + "\n"))
			return
		}
		w.Write([]byte("ok\n"))
	})
}
