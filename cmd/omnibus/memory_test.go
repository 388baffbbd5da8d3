package main

import (
	"strings"
	"testing"

	"github.com/omnibusmq/omnibus/cmd/internal/cli"
)

// --max-memory reaches the binary through OMNIBUS_MAX_MEMORY, and the
// start-up line says what the budget is: a size, none (0), or by default
// half of the machine's or the cgroup's memory, naming the source.
func TestMaxMemoryAtStart(t *testing.T) {
	bin := buildBinary(t)
	base := []string{"OMNIBUS_MEMORY=true", "OMNIBUS_AMQP_ADDR=127.0.0.1:0", "OMNIBUS_HTTP_ADDR=-", "OMNIBUS_HTTPS_ADDR=-", "OMNIBUS_AMQPS_ADDR=-"}
	for _, c := range []struct{ env, want string }{
		{"OMNIBUS_MAX_MEMORY=64MiB", `"maxMemory": "64MiB"`},
		{"OMNIBUS_MAX_MEMORY=0", `"maxMemory": "none"`},
		{"OMNIBUS_MAX_MEMORY=auto", `"maxMemory": "`},
	} {
		p := startBinary(t, bin, append(append([]string{}, base...), c.env))
		logs := p.logs.String()
		_ = p.cmd.Process.Kill()
		<-p.done
		if !strings.Contains(logs, c.want) {
			t.Errorf("%s: the start-up line lacks %s:\n%s", c.env, c.want, logs)
		}
		if c.env == "OMNIBUS_MAX_MEMORY=auto" && !strings.Contains(logs, "(1/2 of ") {
			t.Errorf("the default budget does not say where its figure came from:\n%s", logs)
		}
	}
	t.Setenv("OMNIBUS_MAX_MEMORY", "lots")
	if err := serve(nil); err == nil || !strings.Contains(err.Error(), "OMNIBUS_MAX_MEMORY") || cli.ExitCode(err) != 2 {
		t.Fatalf("serve with OMNIBUS_MAX_MEMORY=lots: %v", err)
	}
}
