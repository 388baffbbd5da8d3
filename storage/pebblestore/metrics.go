package pebblestore

import (
	dto "github.com/prometheus/client_model/go"
)

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
	lat := s.db.Metrics().LogWriter.FsyncLatency
	if lat == nil {
		return nil, false
	}
	var m dto.Metric
	if err := lat.Write(&m); err != nil || m.Histogram == nil {
		return nil, false
	}
	return m.Histogram, true
}
