package bench

import (
	"context"
	"errors"
	"time"

	"github.com/Azure/go-amqp"
)

// attachTries bounds how often attachRetrying asks again.
const attachTries = 20

// attachRetryWait is the pause before asking again.
const attachRetryWait = 100 * time.Millisecond

// attachRetrying runs attach until it succeeds, fails with anything but
// com.microsoft:server-busy, or has been refused busy attachTries times.
// A cluster node answers an attach busy while the leadership of the
// entity's group settles (it may know a leader that has just moved on);
// the SDKs retry that, and so does the load generator, rather than
// failing a run over a moment of a new cluster.
func attachRetrying(ctx context.Context, attach func() error) error {
	var err error
	for range attachTries {
		if err = attach(); !isServerBusy(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(attachRetryWait):
		}
	}
	return err
}

// isServerBusy reports whether err is the broker's
// com.microsoft:server-busy.
func isServerBusy(err error) bool {
	var ae *amqp.Error
	return errors.As(err, &ae) && ae.Condition == "com.microsoft:server-busy"
}
