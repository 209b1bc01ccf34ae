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
// index cache appears only when Options.IndexCacheSize is set. The sync
// figures (SyncStats) appear only on a store that syncs its commits.
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
		commits: prometheus.NewDesc("berth_kv_sync_commits_total",
			"Metadata commits that waited for a sync round.", nil, nil),
		rounds: prometheus.NewDesc("berth_kv_sync_rounds_total",
			"Sync rounds of the metadata store, each covering every commit before it.", nil, nil),
		files: prometheus.NewDesc("berth_kv_sync_fdatasyncs_total",
			"Log fdatasyncs issued by the metadata store's sync rounds.", nil, nil),
		roundTime: prometheus.NewDesc("berth_kv_sync_round_seconds_total",
			"Time the metadata store's sync rounds took, one after the other.", nil, nil),
		waitTime: prometheus.NewDesc("berth_kv_sync_wait_seconds_total",
			"Time metadata commits waited for their sync round, summed over commits.", nil, nil),
		checkpoints: prometheus.NewDesc("berth_kv_checkpoints_total",
			"Syncs of the metadata store's own logs that let its journal reuse space.", nil, nil),
	}
}

type collector struct {
	b                                    *DB
	lsm, vlog, hits, misses, ratio, cost *prometheus.Desc
	commits, rounds, files               *prometheus.Desc
	roundTime, waitTime, checkpoints     *prometheus.Desc
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.lsm, c.vlog, c.hits, c.misses, c.ratio, c.cost, c.commits, c.rounds, c.files, c.roundTime, c.waitTime, c.checkpoints} {
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
	if c.b.jl != nil {
		st := c.b.SyncStats()
		ch <- prometheus.MustNewConstMetric(c.commits, prometheus.CounterValue, float64(st.Commits))
		ch <- prometheus.MustNewConstMetric(c.rounds, prometheus.CounterValue, float64(st.Rounds))
		ch <- prometheus.MustNewConstMetric(c.files, prometheus.CounterValue, float64(st.Files))
		ch <- prometheus.MustNewConstMetric(c.roundTime, prometheus.CounterValue, st.RoundTime.Seconds())
		ch <- prometheus.MustNewConstMetric(c.waitTime, prometheus.CounterValue, st.WaitTime.Seconds())
		ch <- prometheus.MustNewConstMetric(c.checkpoints, prometheus.CounterValue, float64(st.Checkpoints))
	}
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
