package bench

import (
	"os"
	"runtime"
	"testing"
	"time"
)

func TestProcessCPUReadsThisProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	before, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Burn CPU until the self-measurement has moved by 50 ms, then the
	// /proc reading (10 ms resolution) must have moved too.
	start := selfCPU()
	x := 0
	for selfCPU()-start < 50*time.Millisecond {
		for i := range 100000 {
			x += i
		}
	}
	_ = x
	after, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if d := after - before; d < 30*time.Millisecond {
		t.Errorf("/proc CPU moved by %v while the process burnt 50 ms", d)
	}
	if _, err := processCPU(-1); err == nil {
		t.Error("processCPU(-1) succeeded")
	}
}
