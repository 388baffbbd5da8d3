package amqpserver

import (
	"os"
	"testing"

	"github.com/omnibusmq/omnibus/core/coretest"
)

// TestMain fails the package if goroutines of the server outlive the
// tests: every test shuts its server down, and Shutdown must leave no
// connection, reader, writer or helper goroutine behind.
func TestMain(m *testing.M) {
	os.Exit(coretest.MainWithLeakCheck(m, "omnibus/amqpserver.("))
}
