//go:build !unix

package amqpserver

import "errors"

// setNOFILE: descriptor limits are a unix notion.
func setNOFILE(uint64) error { return errors.New("RLIMIT_NOFILE is not available on this system") }
