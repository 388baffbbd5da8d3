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

func TestMachineUseIsShareOfAllCPUTime(t *testing.T) {
	at := func(busy, idle, steal time.Duration) cpuSample {
		return cpuSample{machine: machineTimes{busy: busy, idle: idle, steal: steal}, machineOK: true}
	}
	a := at(10*time.Second, 50*time.Second, time.Second)
	b := at(17*time.Second, 52*time.Second, 2*time.Second) // +7 busy, +2 idle, +1 stolen
	if busy, steal := machineUse(a, b); busy != 70 || steal != 10 {
		t.Errorf("busy %v %%, steal %v %%; want 70, 10", busy, steal)
	}
	if busy, steal := machineUse(a, cpuSample{}); busy != 0 || steal != 0 {
		t.Errorf("without a second sample: busy %v, steal %v; want 0, 0", busy, steal)
	}
	if busy, steal := machineUse(a, a); busy != 0 || steal != 0 {
		t.Errorf("over no time: busy %v, steal %v; want 0, 0", busy, steal)
	}
}
