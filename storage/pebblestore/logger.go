package pebblestore

import (
	"github.com/cockroachdb/pebble/v2"
	"go.uber.org/zap"
)

// zapLogger routes Pebble's logger to zap. Pebble logs routine events
// (WAL and table lifecycle on open) through Infof, so those go to Debug.
type zapLogger struct{ s *zap.SugaredLogger }

var _ pebble.Logger = zapLogger{}

// Infof implements pebble.Logger.
func (l zapLogger) Infof(format string, args ...any) { l.s.Debugf(format, args...) }

// Errorf implements pebble.Logger.
func (l zapLogger) Errorf(format string, args ...any) { l.s.Errorf(format, args...) }

// Fatalf implements pebble.Logger. Pebble calls it for unrecoverable states
// (a failed WAL write, corruption) and expects it not to return; zap's
// Fatal logs and exits even when the logger is a no-op.
func (l zapLogger) Fatalf(format string, args ...any) { l.s.Fatalf(format, args...) }

// eventListener reports the Pebble events an operator should see: write
// stalls (the broker stops accepting sends) and slow disks.
func eventListener(log *zap.Logger) *pebble.EventListener {
	return &pebble.EventListener{
		WriteStallBegin: func(info pebble.WriteStallBeginInfo) {
			log.Warn("pebble write stall began", zap.String("reason", info.Reason))
		},
		WriteStallEnd: func() {
			log.Info("pebble write stall ended")
		},
		DiskSlow: func(info pebble.DiskSlowInfo) {
			log.Warn("pebble disk slow", zap.String("path", info.Path),
				zap.Duration("duration", info.Duration))
		},
		BackgroundError: func(err error) {
			log.Error("pebble background error", zap.Error(err))
		},
	}
}
