package pebblestore

// SyncLazily runs the lazy sync at once, as its timer would.
func (s *Store) SyncLazily() { s.syncLazily() }
