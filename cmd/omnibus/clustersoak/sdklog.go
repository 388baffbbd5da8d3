package clustersoak

import (
	"sync"

	azlog "github.com/Azure/azure-sdk-for-go/sdk/azcore/log"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// The SDK's log, one per process.
//
// The Go SDK keeps its log listener and event filter in plain package
// variables (azcore/internal/log), read without a lock by every client
// goroutine that logs. Setting them while an SDK goroutine runs is a data
// race, and a run's SDK clients leave goroutines behind (a releaser, an
// rpc link's reader) that can log after the run has ended. So the listener
// is set once, before the first run, and never again: it hands each line
// to the readers registered now (several runs, tests, may overlap), and a
// run that ends only takes its reader out.

// sdkLog routes the process's SDK log lines to the registered readers.
type sdkLog struct {
	once    sync.Once
	mu      sync.Mutex // guards readers, next
	readers map[int]func(string)
	next    int
}

// theSDKLog is this process's one router: the SDK's listener it stands
// for is itself one per process.
var theSDKLog sdkLog

// readSDKLog has read called with every SDK receiver log line until stop
// is called.
func readSDKLog(read func(string)) (stop func()) {
	return theSDKLog.add(read)
}

// add registers read, installing the SDK's listener on first use.
func (l *sdkLog) add(read func(string)) (stop func()) {
	l.once.Do(func() {
		azlog.SetEvents(azservicebus.EventReceiver)
		azlog.SetListener(func(_ azlog.Event, msg string) { l.dispatch(msg) })
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.readers == nil {
		l.readers = map[int]func(string){}
	}
	id := l.next
	l.next++
	l.readers[id] = read
	return func() {
		l.mu.Lock()
		delete(l.readers, id)
		l.mu.Unlock()
	}
}

// dispatch hands msg to every registered reader.
func (l *sdkLog) dispatch(msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, read := range l.readers {
		read(msg)
	}
}
