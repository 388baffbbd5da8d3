package amqpserver

import (
	"os"
	"testing"

	"github.com/omnibusmq/omnibus/core/coretest"
)

// TestMain fails the package if goroutines of the server outlive the
// tests: every test shuts its server down, and Shutdown must leave no
// connection, reader, writer or helper goroutine behind. Started with
// serverProcessEnv set, the binary is instead a server for the
// measurements of held connections (measure_helper_test.go).
func TestMain(m *testing.M) {
	if os.Getenv(serverProcessEnv) != "" {
		os.Exit(runServerProcess())
	}
	os.Exit(coretest.MainWithLeakCheck(m, "omnibus/amqpserver.("))
}
