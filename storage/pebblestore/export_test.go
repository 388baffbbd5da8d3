package pebblestore

// SyncLazily runs the lazy sync at once, as its timer would.
func (s *Store) SyncLazily() { s.syncLazily() }

// FlushAsync starts flushing the memtable and returns at once.
func (s *Store) FlushAsync() error {
	_, err := s.db.AsyncFlush()
	return err
}

// WriteWALMark records at once how far the write-ahead log is synced, as
// the store does every walMarkInterval.
func (s *Store) WriteWALMark() { s.mark.write() }

// Stalled reports whether Pebble stalls writes now.
func (s *Store) Stalled() bool { return s.faults.stalled.Load() }
