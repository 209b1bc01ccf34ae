package daemon

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"berth/vfs/chunk"
)

// storeMetrics are the figures of a remote chunk store (S3) that matter
// when several nodes share it: each request's latency and failures, and
// the retries that hid a failure from the caller.
type storeMetrics struct {
	duration *prometheus.HistogramVec
	errors   *prometheus.CounterVec
	retries  prometheus.Counter
}

// newStoreMetrics registers the figures with reg (nil: kept unregistered,
// as for fsck and migrate).
func newStoreMetrics(reg prometheus.Registerer) *storeMetrics {
	m := &storeMetrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "berth_chunk_store_request_duration_seconds",
			Help:    "Time of one request to the remote chunk store (S3), by operation, each attempt of a retried call apart.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"op"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_chunk_store_errors_total",
			Help: "Failed requests to the remote chunk store (S3), by operation; a missing chunk is not counted.",
		}, []string{"op"}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_chunk_store_retries_total",
			Help: "Requests to the remote chunk store (S3) made again after a transient failure.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.duration, m.errors, m.retries)
	}
	return m
}

// retryable is chunk.IsTransient, counting the retries it allows.
func (m *storeMetrics) retryable(err error) bool {
	ok := chunk.IsTransient(err)
	if ok {
		m.retries.Inc()
	}
	return ok
}

// observe records one request of op that began at start.
func (m *storeMetrics) observe(op string, start time.Time, err error) {
	m.duration.WithLabelValues(op).Observe(time.Since(start).Seconds())
	if err != nil && !errors.Is(err, chunk.ErrNotFound) && !errors.Is(err, context.Canceled) {
		m.errors.WithLabelValues(op).Inc()
	}
}

// meteredStore is a chunk store whose requests storeMetrics records; it
// sits under the retry and limit wrappers, so it sees each attempt.
type meteredStore struct {
	chunk.Store
	m *storeMetrics
}

// Unwrap lets chunk.ParallelismOf find the S3 store's Parallelism.
func (s meteredStore) Unwrap() chunk.Store { return s.Store }

func (s meteredStore) Put(ctx context.Context, id chunk.ID, blob []byte) (err error) {
	defer func(t time.Time) { s.m.observe("put", t, err) }(time.Now())
	return s.Store.Put(ctx, id, blob)
}

func (s meteredStore) Get(ctx context.Context, id chunk.ID) (b []byte, err error) {
	defer func(t time.Time) { s.m.observe("get", t, err) }(time.Now())
	return s.Store.Get(ctx, id)
}

// GetInto keeps the inner store's buffer reuse (chunk.BufferGetter).
func (s meteredStore) GetInto(ctx context.Context, id chunk.ID, dst []byte) (b []byte, err error) {
	defer func(t time.Time) { s.m.observe("get", t, err) }(time.Now())
	if bg, ok := s.Store.(chunk.BufferGetter); ok {
		return bg.GetInto(ctx, id, dst)
	}
	return s.Store.Get(ctx, id)
}

func (s meteredStore) Has(ctx context.Context, id chunk.ID) (ok bool, err error) {
	defer func(t time.Time) { s.m.observe("has", t, err) }(time.Now())
	return s.Store.Has(ctx, id)
}

func (s meteredStore) Delete(ctx context.Context, id chunk.ID) (err error) {
	defer func(t time.Time) { s.m.observe("delete", t, err) }(time.Now())
	return s.Store.Delete(ctx, id)
}
