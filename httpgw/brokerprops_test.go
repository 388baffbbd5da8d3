package httpgw

import (
	"strings"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/core"
)

func TestParseBrokerPropertiesForms(t *testing.T) {
	date := time.Date(1994, 11, 6, 8, 49, 37, 0, time.UTC)
	cases := []struct {
		name string
		in   string
		want core.Message
	}{
		{"empty", "", core.Message{}},
		{"strict JSON", `{"Label":"M1","TimeToLive":90.5,"MessageId":"m","CorrelationId":"c"}`,
			core.Message{Subject: "M1", TimeToLive: 90500 * time.Millisecond, MessageID: "m", CorrelationID: "c"}},
		{"case-insensitive keys", `{"label":"x","SESSIONID":"s","partitionkey":"s"}`, core.Message{Subject: "x", SessionID: "s", PartitionKey: "s"}},
		{"get-only and unknown keys ignored", `{"SequenceNumber":5,"DeliveryCount":2,"LockToken":"x","Whatever":{"a":1},"State":"Active"}`, core.Message{}},
		{"numeric ids", `{"MessageId":12345}`, core.Message{MessageID: "12345"}},
		{"TTL as string", `{"TimeToLive":"10"}`, core.Message{TimeToLive: 10 * time.Second}},
		{"TTL max", `{"TimeToLive":922337203685.47754}`, core.Message{TimeToLive: core.MaxTimeToLive}},
		{"TimeSpan", `{"TimeToLiveTimeSpan":"1.02:03:04.5"}`, core.Message{TimeToLive: 26*time.Hour + 3*time.Minute + 4500*time.Millisecond}},
		{"python repr simple", `{'Label': 'py', 'ForcePersistence': True, 'ReplyTo': "a'b", 'To': None}`, core.Message{Subject: "py", ReplyTo: "a'b"}},
		{"typographic quotes (docs example)", `{ “SessionId”: “{27729E1}”, “TimeToLive” : 90, "ScheduledEnqueueTimeUtc“ : " Sun, 06 Nov 1994 08:49:37 GMT“}`,
			core.Message{SessionID: "{27729E1}", TimeToLive: 90 * time.Second, ScheduledEnqueueTime: date}},
		{"RFC 850 date", `{"ScheduledEnqueueTimeUtc":"Sunday, 06-Nov-94 08:49:37 GMT"}`, core.Message{ScheduledEnqueueTime: date}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var m core.Message
			err := parseBrokerProperties(c.in, &m)
			if err != nil {
				t.Fatal(err)
			}
			if m.Subject != c.want.Subject || m.TimeToLive != c.want.TimeToLive || m.MessageID != c.want.MessageID ||
				m.CorrelationID != c.want.CorrelationID || m.SessionID != c.want.SessionID || m.PartitionKey != c.want.PartitionKey ||
				m.ReplyTo != c.want.ReplyTo || !m.ScheduledEnqueueTime.Equal(c.want.ScheduledEnqueueTime) {
				t.Errorf("got %+v\nwant %+v", m, c.want)
			}
		})
	}
}

func TestParseBrokerPropertiesErrors(t *testing.T) {
	cases := map[string]string{
		`[1]`:                                  "not a JSON object",
		`{"Label":5.5.5}`:                      "not a JSON object",
		`{"Label":{"a":1}}`:                    "Label must be a string",
		`{"TimeToLive":0}`:                     "positive",
		`{"TimeToLive":true}`:                  "TimeToLive",
		`{"TimeToLiveTimeSpan":"x"}`:           "TimeToLiveTimeSpan",
		`{"ForcePersistence":"yes"}`:           "ForcePersistence",
		`{"SessionId":"a","PartitionKey":"b"}`: "must be equal",
		`{"MessageId":"` + strings.Repeat("m", 129) + `"}`: "longer than 128",
		`{"ScheduledEnqueueTimeUtc":"06/11/1994"}`:         "RFC 1123",
		`{'Label': 'unterminated}`:                         "not a JSON object",
		`{'Label': 'it''s', 'To': None}`:                   "not a JSON object",
	}
	for in, want := range cases {
		var m core.Message
		if err := parseBrokerProperties(in, &m); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error containing %q", in, err, want)
		}
	}
}

func TestFormatBrokerProperties(t *testing.T) {
	enq := time.Date(2014, 7, 2, 1, 32, 27, 0, time.UTC)
	m := &core.Message{
		MessageID: "31907572164743c38741631acd554d6f", Subject: "M1", SequenceNumber: 2, DeliveryCount: 1,
		EnqueuedTime: enq, LockedUntil: enq.Add(time.Minute), TimeToLive: 10 * time.Second,
		LockToken: mustUUID(t, "7da9cfd5-40d5-4bb1-8d64-ec5a52e1c547"),
	}
	want := `{"DeliveryCount":1,"EnqueuedSequenceNumber":0,"EnqueuedTimeUtc":"Wed, 02 Jul 2014 01:32:27 GMT","Label":"M1",` +
		`"LockToken":"7da9cfd5-40d5-4bb1-8d64-ec5a52e1c547","LockedUntilUtc":"Wed, 02 Jul 2014 01:33:27 GMT",` +
		`"MessageId":"31907572164743c38741631acd554d6f","SequenceNumber":2,"State":"Active","TimeToLive":10}`
	if got := formatBrokerProperties(m); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	// Without a lock, and with the entity's TTL derived from ExpiresAt.
	m.LockToken, m.TimeToLive, m.ExpiresAt = core.LockToken{}, 0, enq.Add(1500*time.Millisecond)
	got := formatBrokerProperties(m)
	if strings.Contains(got, "LockToken") || strings.Contains(got, "LockedUntilUtc") || !strings.Contains(got, `"TimeToLive":1.5`) {
		t.Errorf("unlocked: %s", got)
	}
	m.ExpiresAt = time.Time{}
	if got := formatBrokerProperties(m); !strings.Contains(got, `"TimeToLive":922337203685.47754`) {
		t.Errorf("no expiry: %s", got)
	}
}

func mustUUID(t testing.TB, s string) core.UUID {
	t.Helper()
	u, err := core.ParseUUID(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
