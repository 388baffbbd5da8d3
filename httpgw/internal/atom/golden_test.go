package atom

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// checkGolden compares got with testdata/name, or rewrites it with -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file\n got: %s\nwant: %s", name, got, want)
	}
}

func TestEncodeGolden(t *testing.T) {
	entry := func(path, title string, content any) Entry {
		return Entry{
			ID:        base + path + "?api-version=2021-05",
			Title:     title,
			Published: created,
			Updated:   updated,
			Author:    "sbemulatorns",
			Content:   content,
		}
	}
	defaultQueue := DefaultQueueDescription()
	trueRule := &RuleDescription{Name: "$Default", CreatedAt: created}
	falseRule := &RuleDescription{Filter: &FalseFilter{}, Action: &EmptyRuleAction{}, Name: "nothing", CreatedAt: created}
	withDefaultRule := fullSubscription()
	withDefaultRule.DefaultRuleDescription = &RuleDescription{Filter: &SQLFilter{SQLExpression: "a = 1"}, Name: "first"}

	tests := []struct {
		golden string
		entry  Entry
	}{
		{"queue_entry.xml", entry("q1", "q1", fullQueue())},
		{"queue_default_entry.xml", entry("q2", "q2", defaultQueue)},
		{"topic_entry.xml", entry("t1", "t1", fullTopic())},
		{"subscription_entry.xml", entry("t1/Subscriptions/s1", "s1", fullSubscription())},
		{"subscription_default_rule_entry.xml", entry("t1/Subscriptions/s2", "s2", withDefaultRule)},
		{"rule_sql_entry.xml", entry("t1/Subscriptions/s1/Rules/sql-rule", "sql-rule", sqlRule())},
		{"rule_correlation_entry.xml", entry("t1/Subscriptions/s1/Rules/correlation-rule", "correlation-rule", correlationRule())},
		{"rule_true_entry.xml", entry("t1/Subscriptions/s1/Rules/$Default", "$Default", trueRule)},
		{"rule_false_entry.xml", entry("t1/Subscriptions/s1/Rules/nothing", "nothing", falseRule)},
		{"namespace_entry.xml", entry("$namespaceinfo", "sbemulatorns", namespaceInfo())},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			var buf bytes.Buffer
			if err := EncodeEntry(&buf, tt.entry); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, tt.golden, buf.Bytes())
		})
	}
}

func TestEncodeFeedGolden(t *testing.T) {
	q1, q2 := fullQueue(), DefaultQueueDescription()
	feed := Feed{
		ID:      base + "$Resources/Queues?%24skip=0&%24top=2&api-version=2021-05",
		Title:   "Queues",
		Updated: updated,
		Next:    base + "$Resources/Queues?%24skip=2&%24top=2&api-version=2021-05",
		Entries: []Entry{
			{ID: base + "q1?api-version=2021-05", Title: "q1", Published: created, Updated: updated, Author: "sbemulatorns", Content: q1},
			{ID: base + "q2?api-version=2021-05", Title: "q2", Updated: updated, Content: &q2},
		},
	}
	var buf bytes.Buffer
	if err := EncodeFeed(&buf, feed); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "queues_feed.xml", buf.Bytes())

	buf.Reset()
	empty := Feed{ID: base + "t1/Subscriptions/s1/Rules?api-version=2021-05", Title: "Rules", Updated: updated}
	if err := EncodeFeed(&buf, empty); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "rules_empty_feed.xml", buf.Bytes())
}

func TestEncodeNotFoundFeedGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := EncodeNotFoundFeed(&buf, "uuid:3b0c1c3c-1ba0-4a52-8d0d-d0a5b4ff1a4a;id=12345", time.Date(2026, 4, 12, 1, 28, 26, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "not_found_feed.xml", buf.Bytes())
}

func TestEncodeErrorGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := EncodeError(&buf, 409, "SubCode=40900. Conflict. The messaging entity 'sbemulatorns:Queue:q1' already exists. TrackingId:x_G1, SystemTracker:sbemulatorns:Queue:q1, Timestamp:2026-04-12T01:28:26"); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "error_409.xml", buf.Bytes())
}
