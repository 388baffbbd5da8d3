package bench

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// The slowest 1 % are the messages with the longest scheduled-time →
// delivery, and their stages add up: what the generator held them, and
// what came after.
func TestSlowestStagesSplitsTheTail(t *testing.T) {
	start := time.Unix(1000, 0)
	l := newStageLog(start)
	at := func(ms float64) time.Time { return start.Add(time.Duration(ms * float64(time.Millisecond))) }
	// 200 messages: 198 fast ones (1 ms each, none of it in the
	// generator), and two slow ones: one held 8 ms by the generator, one
	// 2 ms, each delivered 20 ms after it was scheduled.
	for i := range 200 {
		seq := uint64(i + 1)
		sched := 10 + float64(i)
		handed, acked, arrived := sched, sched+0.5, sched+1
		switch i {
		case 50:
			handed, acked, arrived = sched+8, sched+15, sched+20
		case 120:
			handed, acked, arrived = sched+2, sched+12, sched+20
		}
		l.handed(seq, at(sched), at(handed))
		l.acked(seq, at(acked))
		l.arrived(seq, at(arrived))
		l.arrived(seq, at(arrived+100)) // a redelivery: the first counts
	}
	// One scheduled in the warm-up (left out) and one never delivered.
	l.handed(201, at(1), at(500))
	l.acked(201, at(501))
	l.arrived(201, at(502))
	l.handed(202, at(300), at(300))

	got, ok := l.slowest(at(5))
	if !ok {
		t.Fatal("no slowest stages")
	}
	want := SlowestStages{Count: 2, EndToEnd: 20, Generator: 5, Broker: 15, Acked: 8.5}
	if got.Count != want.Count || !near(got.EndToEnd, want.EndToEnd) || !near(got.Generator, want.Generator) ||
		!near(got.Broker, want.Broker) || !near(got.Acked, want.Acked) {
		t.Errorf("slowest = %+v, want %+v", got, want)
	}
}

func TestSlowestStagesWithoutMessages(t *testing.T) {
	var none *stageLog
	none.handed(1, time.Now(), time.Now()) // a run without a target rate
	if _, ok := none.slowest(time.Now()); ok {
		t.Error("a run that kept no stages reported some")
	}
	if _, ok := newStageLog(time.Now()).slowest(time.Now()); ok {
		t.Error("an empty log reported stages")
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

// --stages writes every message's moments, in send order, in
// milliseconds since the run's start, with the start itself on the
// first line; unknown moments are empty.
func TestStagesCSV(t *testing.T) {
	start := time.Date(2026, 11, 29, 11, 0, 0, 0, time.UTC)
	l := newStageLog(start)
	at := func(ms float64) time.Time { return start.Add(time.Duration(ms * float64(time.Millisecond))) }
	l.handed(1, at(1), at(1.25))
	l.acked(1, at(2.5))
	l.arrived(1, at(3.125))
	l.handed(2, at(2), at(2))
	l.arrived(2, at(4)) // delivered, its acceptance not (yet) seen

	path := filepath.Join(t.TempDir(), "stages.csv")
	if err := l.writeCSV(path, at(1000)); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "# start 2026-11-29T11:00:00Z (unix ns " + strconv.FormatInt(start.UnixNano(), 10) + "); measured from 1000.000 ms\n" +
		"sched_ms,handed_ms,acked_ms,arrived_ms\n" +
		"1.000,1.250,2.500,3.125\n" +
		"2.000,2.000,,4.000\n"
	if string(got) != want {
		t.Errorf("stages CSV:\n%s\nwant:\n%s", got, want)
	}
}
