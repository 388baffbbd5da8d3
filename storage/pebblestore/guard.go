package pebblestore

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/omnibusmq/omnibus/storage"
	"go.uber.org/zap"
)

// fatalPanic is what the store's Pebble logger panics with when Pebble
// calls Fatalf on a goroutine where unwinding is safe (see safeToPanic).
type fatalPanic struct{ err error }

// protect runs fn and turns a panic into an error: a Fatalf of Pebble's
// (see pebbleLogger.Fatalf) or a panic of Pebble's own, such as the one a
// blob file cut short causes on its first read. A panic while writing
// leaves Pebble's commit state unknown, so it also stops all writes.
//
// A panic of a Scan callback is not the store's: when *inCallback is set
// the panic goes on.
//
// Its name is looked for on the stack by safeToPanic: keep the method.
func (s *Store) protect(what string, write bool, inCallback *bool, fn func() error) (err error) {
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		if inCallback != nil && *inCallback {
			panic(p)
		}
		if a, ok := p.(openAbort); ok {
			err = a.err
			return
		}
		if f, ok := p.(fatalPanic); ok {
			err = fmt.Errorf("%w: pebblestore: %s: %v", storage.ErrUnavailable, what, f.err)
			return
		}
		s.log.Error("pebble panicked", zap.String("during", what), zap.Any("panic", p),
			zap.ByteString("stack", debug.Stack()))
		kind := storage.ErrUnavailable
		if !write && looksCorrupt(fmt.Sprint(p)) {
			kind = storage.ErrCorrupt
		}
		err = fmt.Errorf("%w: pebblestore: %s: pebble panicked: %v", kind, what, p)
		if write {
			s.faults.setFatal(err)
		}
	}()
	return fn()
}

// looksCorrupt reports whether a panic of Pebble's reports damaged data.
// A blob file cut short makes Pebble v2.1 panic with "unknown metadata
// type" while reporting the corruption it found.
func looksCorrupt(msg string) bool {
	return strings.Contains(msg, "corrupt") || strings.Contains(msg, "unknown metadata type")
}

// protectName is the name runtime.Frames gives Store.protect.
var protectName = runtime.FuncForPC(reflect.ValueOf((*Store).protect).Pointer()).Name()

// unsafeToUnwind names the Pebble functions that hold a lock they release
// without defer, or that release one a deferred call expects held, while
// they may call Fatalf: a panic through them would wedge every later commit
// or kill the process.
var unsafeToUnwind = []string{"commitPipeline", "makeRoomForWrite", "rotateWAL", "logAndApply",
	"UpdateVersionLocked", "(*versionSet)", "flush1", "runCompaction"}

// safeToPanic reports whether the goroutine calling Pebble's Fatalf runs a
// call of the store's (Store.protect is on the stack, and will recover),
// with nothing in between that must not be unwound.
func safeToPanic() bool {
	pcs := make([]uintptr, 128)
	n := runtime.Callers(3, pcs) // above safeToPanic and Fatalf
	frames := runtime.CallersFrames(pcs[:n])
	for {
		fr, more := frames.Next()
		if fr.Function == protectName {
			return true
		}
		for _, name := range unsafeToUnwind {
			if strings.Contains(fr.Function, name) {
				return false
			}
		}
		if !more {
			return false
		}
	}
}

// readError maps the error of a read to the store's errors: a key that is
// not there, data that cannot be read back intact (naming the damaged file
// where Pebble's message numbers it), or a disk that fails.
func (s *Store) readError(what string, err error) error {
	var damaged *damagedFileError
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		return storage.ErrNotFound
	case errors.As(err, &damaged):
		return fmt.Errorf("%w: pebblestore: %s: %v", storage.ErrCorrupt, what, damaged)
	case pebble.IsCorruptionError(err):
		return fmt.Errorf("%w: pebblestore: %s: %v%s", storage.ErrCorrupt, what, err, s.fileHint(err.Error()))
	}
	return fmt.Errorf("%w: pebblestore: %s: %v", storage.ErrUnavailable, what, err)
}

// fileNumRE finds the file number in Pebble's corruption messages
// ("pebble: file 000007: block 206300/4121: crc32c checksum mismatch").
var fileNumRE = regexp.MustCompile(`file (\d{6,})\b`)

// fileHint names the data file a message of Pebble's refers to by number.
func (s *Store) fileHint(msg string) string {
	m := fileNumRE.FindStringSubmatch(msg)
	if m == nil || s.fs == nil {
		return ""
	}
	for _, ext := range []string{".blob", ".sst"} {
		p := s.fs.PathJoin(s.dir, m[1]+ext)
		if _, err := s.fs.Stat(p); err == nil {
			return " (file " + p + ")"
		}
	}
	return ""
}
