package conformance

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core/emuconfig"
)

var update = flag.Bool("update", false, "rewrite Config.json from the profile table")

var kebab = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

func TestRegistry(t *testing.T) {
	ss := Scenarios()
	if len(ss) < 90 {
		t.Errorf("%d scenarios registered, want at least 90", len(ss))
	}
	seen := map[string]bool{}
	claimed := map[Fault]int{}
	for _, s := range ss {
		for _, d := range s.Detects {
			claimed[d.Fault]++
		}
		if seen[s.Name] {
			t.Errorf("duplicate scenario %s", s.Name)
		}
		seen[s.Name] = true
		if !kebab.MatchString(s.Name) {
			t.Errorf("scenario name %q is not kebab-case", s.Name)
		}
		if strings.TrimSpace(s.Seed) == "" {
			t.Errorf("scenario %s names no seed", s.Name)
		}
		if s.Protocol != AMQP && s.Protocol != REST && s.Protocol != Both {
			t.Errorf("scenario %s has protocol %q", s.Name, s.Protocol)
		}
		if s.Run == nil {
			t.Errorf("scenario %s has no body", s.Name)
		}
		for _, d := range s.Detects {
			if !slices.Contains(AllFaults, d.Fault) || strings.TrimSpace(d.Check) == "" {
				t.Errorf("scenario %s claims %+v: an unknown fault or no check", s.Name, d)
			}
		}
	}
	for _, f := range AllFaults {
		if claimed[f] == 0 {
			t.Errorf("no scenario claims to detect fault %s: --prove-failure would prove nothing about it", f)
		}
	}
	if !slices.IsSortedFunc(ss, func(a, b Scenario) int { return strings.Compare(a.Name, b.Name) }) {
		t.Errorf("Scenarios() is not sorted by name")
	}
}

func TestDuplicateRegistrationPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatalf("registering a taken name did not panic")
		}
	}()
	register(Scenario{Name: "send-then-receive"})
}

// TestProfilesUsedAreDeclared runs every scenario against the recording
// target: each profile asked for must be in the table, and each table
// profile must be used.
func TestProfilesUsedAreDeclared(t *testing.T) {
	used := map[string]bool{}
	for _, s := range Scenarios() {
		for _, p := range ProfilesUsed(s) {
			used[p] = true
			if _, ok := profileByName(p); !ok {
				t.Errorf("scenario %s uses profile %q, which is not in the profile table", s.Name, p)
			}
		}
	}
	for _, p := range Profiles() {
		if !used[p.Name] {
			t.Errorf("profile %s is used by no scenario", p.Name)
		}
	}
	if !slices.Equal(ProfilesUsed(mustScenario(t, "forward-to-queue")), []string{"cf-fwd-source", "cf-fwd-target"}) {
		t.Errorf("the recording pass missed a profile of forward-to-queue: %v", ProfilesUsed(mustScenario(t, "forward-to-queue")))
	}
}

func mustScenario(t *testing.T, name string) Scenario {
	for _, s := range Scenarios() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no scenario %s", name)
	return Scenario{}
}

func TestConfigJSONMatchesProfiles(t *testing.T) {
	want, err := EmulatorConfig()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("Config.json", want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("Config.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Config.json is stale; regenerate with go test ./conformance -run ConfigJSON -update")
	}
	cfg, err := emuconfig.Load(bytes.NewReader(got))
	if err != nil {
		t.Fatalf("Config.json does not load: %v", err)
	}
	loaded := map[string]bool{}
	for _, e := range cfg.Entities {
		loaded[e.Path()] = true
	}
	entities := 0
	for _, p := range Profiles() {
		if p.CloudOnly != "" {
			if loaded[p.Name] {
				t.Errorf("cloud-only profile %s is in Config.json", p.Name)
			}
			continue
		}
		entities++
		if !loaded[p.Name] {
			t.Errorf("profile %s is missing from Config.json (have %v)", p.Name, loaded)
		}
		for _, s := range p.Subs {
			if !loaded[p.Name+"/Subscriptions/"+s.Name] && !loaded[p.Name+"/subscriptions/"+s.Name] {
				t.Errorf("subscription %s/%s is missing from Config.json (have %v)", p.Name, s.Name, loaded)
			}
		}
	}
	if entities > 50 {
		t.Errorf("%d queues and topics; the emulator allows 50", entities)
	}
}

func TestEmulatorRanges(t *testing.T) {
	in := func(s *string, lo, hi time.Duration) bool {
		if s == nil {
			return true
		}
		ns, err := emuconfig.ParseDuration(*s)
		d := time.Duration(ns)
		return err == nil && d >= lo && d <= hi
	}
	for _, p := range Profiles() {
		if p.CloudOnly != "" || p.IsTopic() {
			continue
		}
		q := p.Queue
		if !in(q.DefaultMessageTimeToLive, 5*time.Minute, time.Hour) || !in(q.LockDuration, 5*time.Second, 5*time.Minute) ||
			!in(q.DuplicateDetectionHistoryTimeWindow, 5*time.Second, 5*time.Minute) ||
			(q.MaxDeliveryCount != nil && (*q.MaxDeliveryCount < 1 || *q.MaxDeliveryCount > 10)) {
			t.Errorf("profile %s is outside the emulator's ranges", p.Name)
		}
	}
}

func sampleReport() *Report {
	return &Report{Endpoint: "sb://localhost/", Started: time.Unix(0, 0).UTC(), Elapsed: time.Second, Results: []Result{
		{Name: "a", Seed: "002 x", Protocol: AMQP, Status: Passed, Duration: time.Millisecond},
		{Name: "b", Seed: "001 y | z", Protocol: REST, Status: Failed, Duration: time.Second, Detail: "HTTP 404,\nwant 200"},
		{Name: "c", Seed: "004 w", Protocol: Both, Status: Skipped, Detail: "no --http"},
	}}
}

func TestReportText(t *testing.T) {
	var b bytes.Buffer
	if err := sampleReport().Write(&b, FormatText); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if last := lines[len(lines)-1]; last != "1 passed, 1 failed, 1 skipped" {
		t.Errorf("closing line %q", last)
	}
	if !strings.HasPrefix(lines[0], "SCENARIO") || !strings.Contains(out, "HTTP 404, want 200") {
		t.Errorf("text report:\n%s", out)
	}
}

func TestReportMarkdown(t *testing.T) {
	var b bytes.Buffer
	if err := sampleReport().Write(&b, FormatMarkdown); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.HasPrefix(out, "| scenario | seed | protocol | result | time | detail |\n|---|") {
		t.Errorf("markdown header:\n%s", out)
	}
	if !strings.Contains(out, `| b | 001 y \| z | rest | FAIL |`) {
		t.Errorf("pipes in cells are not escaped:\n%s", out)
	}
	if !strings.HasSuffix(out, "\n1 passed, 1 failed, 1 skipped\n") {
		t.Errorf("closing line missing:\n%s", out)
	}
}

func TestReportJSON(t *testing.T) {
	var b bytes.Buffer
	if err := sampleReport().Write(&b, FormatJSON); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Endpoint                string
		Passed, Failed, Skipped int
		Results                 []Result
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Passed != 1 || got.Failed != 1 || got.Skipped != 1 || len(got.Results) != 3 || got.Results[1].Status != Failed {
		t.Errorf("json report %+v", got)
	}
	if err := sampleReport().Write(&b, "yaml"); err == nil {
		t.Errorf("unknown format accepted")
	}
}

func TestRunOneVerdicts(t *testing.T) {
	tg := &Target{}
	pass := runOne(t.Context(), tg, Scenario{Name: "p", Run: func(t *T) {}}, time.Second, false)
	fail := runOne(t.Context(), tg, Scenario{Name: "f", Run: func(t *T) { t.Errorf("one"); t.Fatalf("two") }}, time.Second, false)
	skip := runOne(t.Context(), tg, Scenario{Name: "s", Run: func(t *T) { t.Skipf("why") }}, time.Second, false)
	boom := runOne(t.Context(), tg, Scenario{Name: "b", Run: func(t *T) { var m map[string]int; m["x"] = 1 }}, time.Second, false)
	cleaned := false
	runOne(t.Context(), tg, Scenario{Name: "c", Run: func(t *T) { t.Cleanup(func() { cleaned = true }); t.Fatalf("x") }}, time.Second, false)
	if pass.Status != Passed || fail.Status != Failed || fail.Detail != "one; two" || skip.Status != Skipped || skip.Detail != "why" {
		t.Errorf("verdicts %v %v(%q) %v", pass.Status, fail.Status, fail.Detail, skip.Status)
	}
	if boom.Status != Failed || !strings.Contains(boom.Detail, "panic") {
		t.Errorf("a panicking scenario: %v %q", boom.Status, boom.Detail)
	}
	if !cleaned {
		t.Errorf("cleanup did not run after Fatalf")
	}
	slowSeen := false
	runOne(t.Context(), tg, Scenario{Name: "slow", Run: func(t *T) { slowSeen = t.Slow() }}, time.Second, true)
	if !slowSeen {
		t.Errorf("Options.Slow did not reach the scenario")
	}
}

func TestProfileLocks(t *testing.T) {
	l := newProfileLocks(true)
	unlock := l.lock([]string{"a", "b"})
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.lock([]string{"b"})()
	}()
	select {
	case <-done:
		t.Fatalf("a second scenario took profile b while it was held")
	case <-time.After(50 * time.Millisecond):
	}
	unlock()
	<-done
	newProfileLocks(false).lock([]string{"a"})() // off: never blocks
}

func TestUUIDRoundTrip(t *testing.T) {
	b := [16]byte{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef}
	s := uuidString(b)
	if s != "01234567-89ab-cdef-0123-456789abcdef" {
		t.Fatalf("uuidString = %s", s)
	}
	if got, err := parseUUID(s); err != nil || got != b {
		t.Fatalf("parseUUID = %x, %v", got, err)
	}
	if _, err := parseUUID("nope"); err == nil {
		t.Fatalf("parseUUID accepted nope")
	}
}
