package pebblestore

// SyncLazily runs the lazy sync at once, as its timer would.
func (s *Store) SyncLazily() { s.syncLazily() }

// FlushAsync starts flushing the memtable and returns at once.
func (s *Store) FlushAsync() error {
	_, err := s.db.AsyncFlush()
	return err
}
