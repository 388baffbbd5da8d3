package pebblestore

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// fsyncSource holds Pebble's histogram of the write-ahead log's fsyncs,
// looked up once: pebble.DB.Metrics, the only way to it, computes every
// metric of the database under the database's mutex, which stalls the
// commits of a busy store if done at every scrape. The histogram itself
// is made when the database opens and kept for its life, and reading it
// takes only its own synchronization.
type fsyncSource struct {
	once sync.Once
	h    prometheus.Histogram // nil if Pebble has none
}

// WALFsyncLatency reports Pebble's own histogram of the write-ahead log's
// fsyncs, for metrics: cumulative counts at upper bounds in nanoseconds,
// as Pebble keeps it (pebble.FsyncLatencyBuckets). Pebble records every
// fsync whether anyone reads it or not, so this costs nothing until read.
// ok is false once the store is closed.
func (s *Store) WALFsyncLatency() (h *dto.Histogram, ok bool) {
	if err := s.gate.enter(); err != nil {
		return nil, false
	}
	defer s.gate.leave()
	s.fsync.once.Do(func() { s.fsync.h = s.db.Metrics().LogWriter.FsyncLatency })
	if s.fsync.h == nil {
		return nil, false
	}
	var m dto.Metric
	if err := s.fsync.h.Write(&m); err != nil || m.Histogram == nil {
		return nil, false
	}
	return m.Histogram, true
}
