package core_test

import (
	"os"
	"testing"

	"github.com/omnibusmq/omnibus/core/coretest"
)

// TestMain fails the package if goroutines started by the core outlive
// the tests: every broker is closed by its test.
func TestMain(m *testing.M) {
	os.Exit(coretest.MainWithLeakCheck(m, "omnibus/core."))
}
