package postgres

import "github.com/prometheus/client_golang/prometheus"

// Collector returns a prometheus.Collector that reads the engine's
// figures at scrape time: the Update tries that failed to serialize (a
// rising rate means writers contend, or the database's conflict
// detection is coarse; see docs/operations.md "Metadata on PostgreSQL")
// and the connection pool's. The daemon finds it by type assertion and
// registers it. After Close it reports nothing.
func (d *DB) Collector() prometheus.Collector {
	return &collector{
		d: d,
		retries: prometheus.NewDesc("berth_kv_postgres_retries_total",
			"Metadata transactions that failed to serialize and were run again or given up.", nil, nil),
		conns: prometheus.NewDesc("berth_kv_postgres_connections",
			"Connections of the metadata store's pool, by state.", []string{"state"}, nil),
		waits: prometheus.NewDesc("berth_kv_postgres_acquire_waits_total",
			"Times a metadata call waited for a free connection of the pool.", nil, nil),
	}
}

type collector struct {
	d                     *DB
	retries, conns, waits *prometheus.Desc
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.retries
	ch <- c.conns
	ch <- c.waits
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	if c.d.enter() != nil {
		return
	}
	defer c.d.leave()
	s := c.d.pool.Stat()
	ch <- prometheus.MustNewConstMetric(c.retries, prometheus.CounterValue, float64(c.d.Retries()))
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(s.AcquiredConns()), "acquired")
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(s.IdleConns()), "idle")
	ch <- prometheus.MustNewConstMetric(c.waits, prometheus.CounterValue, float64(s.EmptyAcquireCount()))
}
