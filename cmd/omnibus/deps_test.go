package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestBrokerLinksNoTestClients keeps the broker lean: a new user's `go run
// ./cmd/omnibus` compiled the Azure SDK, go-amqp, gonum/plot and browser
// automation when the tools were subcommands of it. They live in
// cmd/omnibus-tools; none of them may come back into this binary's
// import graph.
func TestBrokerLinksNoTestClients(t *testing.T) {
	forbidden := map[string]string{
		"github.com/Azure/azure-sdk-for-go":              "the Azure SDK is a client: the tools and tests use it",
		"github.com/Azure/go-amqp":                       "go-amqp is a client: the tools and tests use it",
		"gonum.org/v1/plot":                              "plots belong to the load generator (omnibus-tools bench)",
		"github.com/chromedp":                            "browser automation belongs to the console's tests",
		"github.com/omnibusmq/omnibus/conformance":       "the conformance suite runs from omnibus-tools",
		"github.com/omnibusmq/omnibus/cmd/omnibus/bench": "the load generator runs from omnibus-tools",
	}
	// As README's command and `make build` build it: without cgo, under
	// which Pebble links a C zstd (github.com/DataDog/zstd) omnibus never
	// uses.
	forbidden["github.com/DataDog/zstd"] = "Pebble links the C zstd only under cgo: the broker is built with CGO_ENABLED=0"
	list := exec.Command("go", "list", "-deps", ".")
	list.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list -deps named only %d packages: %s", len(deps), out)
	}
	for _, dep := range deps {
		for prefix, why := range forbidden {
			if dep == prefix || strings.HasPrefix(dep, prefix+"/") {
				t.Errorf("the broker imports %s: %s", dep, why)
			}
		}
	}
}
