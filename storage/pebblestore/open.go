package pebblestore

import (
	"errors"
	"fmt"
	"os"

	"github.com/cockroachdb/pebble/v2"
	"github.com/omnibusmq/omnibus/storage"
	"go.uber.org/zap"
)

// Open opens the database in dir, creating it if needed. With
// Options.InMemory, dir only names the database inside its private memory
// file system.
//
// A disk fault while opening (a full disk: Pebble writes when it opens, to
// flush what it replayed from the log) fails Open at once with an error
// wrapping storage.ErrNoSpace or storage.ErrUnavailable that names the
// file; the write that failed is not retried and its file is removed.
// Free space below the reserve does not fail Open: the store opens and
// refuses writes that grow it until space returns (see Health).
func Open(dir string, opts Options) (*Store, error) {
	popts, err := opts.pebbleOptions(dir)
	if err != nil {
		return nil, err
	}
	log := opts.logger()
	s := &Store{dir: dir, fs: popts.FS, log: log, gate: newGate(), faults: newFaults(), repair: opts.Repair,
		noWAL: opts.NoWAL}
	s.mark = &walMark{fs: popts.FS, path: popts.FS.PathJoin(dir, walMarkName), log: log}
	s.markLog, s.markSynced, s.markOK = s.mark.read()
	ffs := &faultFS{FS: popts.FS, faults: s.faults, mark: s.mark, storeDir: popts.FS.PathDir(s.mark.path),
		failLogSyncs: opts.FailLogSyncs, created: map[string]bool{}}
	s.ffs = ffs
	s.faults.changed = s.healthChanged
	s.reserve = newReserve(popts.FS, dir, opts.DiskReserve)
	s.reserve.onChange = s.healthChanged
	popts.FS = ffs
	popts.Logger = pebbleLogger{s: log.Sugar(), onFatal: s.faults.setFatal, onInfo: s.onPebbleInfo}
	popts.EventListener = eventListener(log, s.faults)
	popts.EventListener.PossibleAPIMisuse = s.onAPIMisuse

	s.db, err = s.openPebble(dir, popts, ffs)
	ffs.openDone()
	if err != nil {
		return nil, err
	}
	s.lazy.delay = opts.LazySyncDelay
	if s.lazy.delay == 0 {
		s.lazy.delay = DefaultLazySyncDelay
	}
	s.lazy.log = log
	s.mark.start()
	s.prepareSingleDeletes()
	if err := s.Health(); err != nil {
		log.Warn("store opened refusing writes", zap.Error(err))
	}
	return s, nil
}

// openPebble runs pebble.Open, giving up as soon as a write it makes
// blocks on a disk fault: Pebble would otherwise retry its flush forever
// (on a full disk, hundreds of times a second, leaking a file each time).
// The abandoned open is parked for good (see faults.abandon), the files
// it was writing are removed and the directory lock is released.
func (s *Store) openPebble(dir string, popts *pebble.Options, fs *faultFS) (*pebble.DB, error) {
	db, err := s.tryOpenPebble(dir, popts, fs)
	if err == nil || !pebble.IsCorruptionError(err) {
		return db, s.openError(dir, err)
	}
	path := damagedLog(err)
	if path == "" {
		return nil, s.openError(dir, err)
	}
	rep, cerr := checkWAL(s.fs, path, s.markFor(path))
	if cerr != nil {
		return nil, s.openError(dir, err)
	}
	if !s.repair {
		return nil, fmt.Errorf("pebblestore: cannot open %s: %w: %v; %s", dir, storage.ErrCorrupt, rep, repairHint)
	}
	if rerr := s.repairLog(rep); rerr != nil {
		return nil, fmt.Errorf("pebblestore: cannot open %s: repairing %v: %w", dir, rep, rerr)
	}
	db, err = s.tryOpenPebble(dir, popts, fs)
	return db, s.openError(dir, err)
}

// tryOpenPebble is one attempt of openPebble; its error is Pebble's.
func (s *Store) tryOpenPebble(dir string, popts *pebble.Options, fs *faultFS) (*pebble.DB, error) {
	type result struct {
		db  *pebble.DB
		err error
	}
	done := make(chan result, 1)
	go func() {
		var db *pebble.DB
		err := s.protect("open", false, nil, func() (err error) {
			db, err = pebble.Open(dir, popts)
			return err
		})
		done <- result{db, err}
	}()
	for {
		events := s.faults.eventsC()
		select {
		case r := <-done:
			return r.db, r.err
		default:
		}
		if err := s.faults.openRefusal(); err != nil {
			s.faults.abandon()
			s.removeUnfinished(fs)
			fs.releaseLock()
			return nil, err
		}
		select {
		case r := <-done:
			return r.db, r.err
		case <-events:
		}
	}
}

// openError describes an error of pebble.Open: damaged data wraps
// storage.ErrCorrupt.
func (s *Store) openError(dir string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, storage.ErrCorrupt) || errors.Is(err, storage.ErrUnavailable) || errors.Is(err, storage.ErrNoSpace) {
		return fmt.Errorf("pebblestore: cannot open %s: %w", dir, err)
	}
	if pebble.IsCorruptionError(err) {
		return fmt.Errorf("pebblestore: cannot open %s: %w: %v%s", dir, storage.ErrCorrupt, err, s.fileHint(err.Error()))
	}
	return fmt.Errorf("pebblestore: open %s: %w", dir, err)
}

// removeUnfinished removes the files an abandoned open was writing.
func (s *Store) removeUnfinished(fs *faultFS) {
	for _, p := range fs.unfinished() {
		if err := s.fs.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("cannot remove a file the failed open left", zap.String("path", p), zap.Error(err))
		}
	}
}

// Close implements [storage.Store]. It waits for calls in progress, then
// closes Pebble, which flushes nothing it need not: the WAL already holds
// every committed batch, and closing it syncs what was not yet synced. A
// second Close returns [storage.ErrClosed].
//
// If a write of Pebble's is blocked on a disk fault it cannot survive (a
// full disk under its log), or failed for good, Close does not wait for
// the disk: it leaves Pebble as it is (what was acknowledged is on disk;
// the Apply calls in progress return an error wrapping
// storage.ErrOutcomeUnknown) and returns an error wrapping
// storage.ErrUnavailable.
func (s *Store) Close() error {
	idle, err := s.gate.close()
	if err != nil {
		return err
	}
	s.stopSingleDeleteUpgrade()
	defer s.committers.close()
	s.lazy.stop()
	s.faults.beginClose()
	// Wait for the calls in progress, unless the disk holds them.
	for {
		events := s.faults.eventsC()
		if err := s.faults.stuck(); err != nil {
			return s.abandon(err)
		}
		select {
		case <-idle:
		case <-events:
			continue
		}
		break
	}
	closed := make(chan error, 1)
	go func() {
		closed <- s.protect("close", false, nil, func() error { return s.db.Close() })
	}()
	for {
		events := s.faults.eventsC()
		select {
		case err := <-closed:
			s.mark.stopWriter()
			if err != nil {
				return fmt.Errorf("pebblestore: close: %w", err)
			}
			s.mark.write() // the log's final length, with its end-of-file trailer
			return nil
		case <-events:
			if err := s.faults.stuck(); err != nil {
				return s.abandon(err)
			}
		}
	}
}

// GiveUpOnDisk is for a process about to stop. If a write Pebble cannot
// do without is blocked on the disk (a full disk under its log) or failed
// for good, it gives up on Pebble at once, as Close would: the Apply calls
// waiting on the disk return an error wrapping storage.ErrOutcomeUnknown,
// so that their clients get an answer and the process is not held up. It
// does nothing while the disk is healthy, and reports whether it gave up.
// Close must still be called.
func (s *Store) GiveUpOnDisk() bool {
	why := s.faults.stuck()
	if why == nil {
		return false
	}
	s.faults.abandon()
	s.log.Warn("store gives up on its disk for the shutdown", zap.Error(why))
	return true
}

// abandon gives up on Pebble at Close: its blocked writes park for good,
// and its directory lock is released.
func (s *Store) abandon(why error) error {
	s.faults.abandon()
	s.mark.stopWriter()
	s.ffs.releaseLock()
	err := fmt.Errorf("%w: pebblestore: close: the database was left as it was, not closed: %v; "+
		"what was acknowledged is on disk", storage.ErrUnavailable, why)
	s.log.Error("store abandoned at close", zap.Error(err))
	return err
}
