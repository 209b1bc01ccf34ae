package badger

import (
	"github.com/dgraph-io/ristretto/v2"
	"github.com/prometheus/client_golang/prometheus"
)

// Collector returns a prometheus.Collector that reads Badger's own figures
// at scrape time, so nothing is counted twice and nothing runs between
// scrapes. The daemon registers it on its registry. After Close it reports
// nothing.
//
// Sizes come from Badger's size accounting, which Badger refreshes about
// once a minute. Caches are labelled cache="block" or cache="index"; the
// index cache appears only when Options.IndexCacheSize is set.
func (b *DB) Collector() prometheus.Collector {
	cacheLabels := []string{"cache"}
	return &collector{
		b: b,
		lsm: prometheus.NewDesc("berth_kv_lsm_size_bytes",
			"Size of the metadata store's LSM tree files.", nil, nil),
		vlog: prometheus.NewDesc("berth_kv_vlog_size_bytes",
			"Size of the metadata store's value log files.", nil, nil),
		hits: prometheus.NewDesc("berth_kv_cache_hits_total",
			"Metadata store cache lookups that found their entry.", cacheLabels, nil),
		misses: prometheus.NewDesc("berth_kv_cache_misses_total",
			"Metadata store cache lookups that missed.", cacheLabels, nil),
		ratio: prometheus.NewDesc("berth_kv_cache_hit_ratio",
			"Hits over lookups of a metadata store cache since start.", cacheLabels, nil),
		cost: prometheus.NewDesc("berth_kv_cache_size_bytes",
			"Bytes held by a metadata store cache.", cacheLabels, nil),
	}
}

type collector struct {
	b                                    *DB
	lsm, vlog, hits, misses, ratio, cost *prometheus.Desc
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.lsm, c.vlog, c.hits, c.misses, c.ratio, c.cost} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	if c.b.enter() != nil {
		return
	}
	defer c.b.leave()
	lsm, vlog := c.b.db.Size()
	ch <- prometheus.MustNewConstMetric(c.lsm, prometheus.GaugeValue, float64(lsm))
	ch <- prometheus.MustNewConstMetric(c.vlog, prometheus.GaugeValue, float64(vlog))
	c.cache(ch, "block", c.b.db.BlockCacheMetrics())
	c.cache(ch, "index", c.b.db.IndexCacheMetrics())
}

func (c *collector) cache(ch chan<- prometheus.Metric, name string, m *ristretto.Metrics) {
	if m == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.hits, prometheus.CounterValue, float64(m.Hits()), name)
	ch <- prometheus.MustNewConstMetric(c.misses, prometheus.CounterValue, float64(m.Misses()), name)
	ch <- prometheus.MustNewConstMetric(c.ratio, prometheus.GaugeValue, m.Ratio(), name)
	ch <- prometheus.MustNewConstMetric(c.cost, prometheus.GaugeValue, float64(m.CostAdded()-m.CostEvicted()), name)
}
