package bench

import (
	"sync"
	"time"
)

// Stats collects throughput and latency while a run goes on. Events
// before the end of the warm-up are left out of the totals; every event
// shows in the per-second timeline. Safe for concurrent use.
type Stats struct {
	start       time.Time
	measureFrom time.Time
	// stages follows each message through its stages (runs at a target
	// rate that receive their own messages); nil otherwise.
	stages *stageLog

	mu        sync.Mutex // guards the fields below
	sendLat   Histogram  // send → acknowledgement
	e2eLat    Histogram  // send timestamp → delivery
	sendLag   Histogram  // at a target rate: the load generator's own delay (see SendLagged)
	sent      int64      // acknowledged (or presettled) sends, measured
	received  int64      // deliveries, measured
	errs      int64      // every error
	lastSend  time.Time  // last measured events
	lastRecv  time.Time
	errSample []string

	win      window // since the last Tick
	timeline []Point
}

// window is one second of events for the timeline and progress line.
type window struct {
	sent, received, errs int64
	lat                  Histogram // e2e when there are receives, else send
	sendLat              Histogram
}

// Point is one second of a run.
type Point struct {
	T        float64 `json:"t"`        // seconds since the start, at the end of the second
	Sent     int64   `json:"sent"`     // sends acknowledged in the second
	Received int64   `json:"received"` // deliveries in the second
	Errors   int64   `json:"errors"`
	P50ms    float64 `json:"p50ms"` // latency (end-to-end when receiving, else send)
	P99ms    float64 `json:"p99ms"`
}

// NewStats starts collecting at start; events before start+warmup are
// not measured.
func NewStats(start time.Time, warmup time.Duration) *Stats {
	return &Stats{start: start, measureFrom: start.Add(warmup)}
}

// followStages makes the run keep each message's stages, to say where
// its slowest end-to-end latencies went ([Result.Slowest]). Call it
// before any event.
func (s *Stats) followStages() { s.stages = newStageLog(s.start) }

// Send records a send acknowledged at now that took lat (lat < 0: no
// latency known, e.g. presettled).
func (s *Stats) Send(now time.Time, lat time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.win.sent++
	if lat >= 0 {
		s.win.sendLat.Record(lat)
	}
	if now.Before(s.measureFrom) {
		return
	}
	s.sent++
	if lat >= 0 {
		s.sendLat.Record(lat)
	}
	s.lastSend = now
}

// SendLagged records, at a target rate, a sender that got its slot at
// now, lag after the slot's scheduled time. Messages carry their
// scheduled time, so this lag is part of their end-to-end latency: the
// load generator's own share, which grows when it is short of CPU.
func (s *Stats) SendLagged(now time.Time, lag time.Duration) {
	if now.Before(s.measureFrom) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sendLag.Record(max(lag, 0))
}

// Receive records a delivery at now, lat after its send timestamp.
func (s *Stats) Receive(now time.Time, lat time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.win.received++
	s.win.lat.Record(lat)
	if now.Before(s.measureFrom) {
		return
	}
	s.received++
	s.e2eLat.Record(lat)
	s.lastRecv = now
}

// Error records a failed operation; the first few are kept as samples.
func (s *Stats) Error(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs++
	s.win.errs++
	if len(s.errSample) < maxExamples {
		s.errSample = append(s.errSample, err.Error())
	}
}

// Tick closes the current second at now and returns it.
func (s *Stats) Tick(now time.Time) Point {
	s.mu.Lock()
	defer s.mu.Unlock()
	lat := &s.win.lat
	if lat.Count() == 0 {
		lat = &s.win.sendLat
	}
	p := Point{
		T:        now.Sub(s.start).Seconds(),
		Sent:     s.win.sent,
		Received: s.win.received,
		Errors:   s.win.errs,
		P50ms:    ms(lat.Quantile(0.5)),
		P99ms:    ms(lat.Quantile(0.99)),
	}
	s.timeline = append(s.timeline, p)
	s.win = window{}
	return p
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// rateLocked is n events over the measured span: from the end of the
// warm-up to the last event.
func (s *Stats) rateLocked(n int64, last time.Time) float64 {
	span := last.Sub(s.measureFrom).Seconds()
	if n == 0 || span <= 0 {
		return 0
	}
	return float64(n) / span
}
