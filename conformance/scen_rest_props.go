package conformance

import (
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// BrokerProperties and custom properties across protocols: seed 000.

func init() {
	register(
		Scenario{Name: "rest-brokerproperties-to-amqp", Seed: "000 settable BrokerProperties sent over REST arrive as the message's system properties", Protocol: Both, Run: func(t *T) {
			q := t.Queue("cf-basic")
			h := brokerHeader(map[string]any{
				"Label": "order", "CorrelationId": "cid-7", "MessageId": "mid-7", "To": "to-7", "ReplyTo": "reply-7",
				"ReplyToSessionId": "rsid-7", "TimeToLive": 90,
			})
			h.Set("Content-Type", "application/json")
			t.restSend(q, []byte(`{"n":1}`), h)
			m := t.ReceiveN(t.Receiver(q, "", nil), 1, 10*time.Second)[0]
			for name, got := range map[string]any{
				"order": deref(m.Subject), "cid-7": deref(m.CorrelationID), "mid-7": m.MessageID, "to-7": deref(m.To),
				"reply-7": deref(m.ReplyTo), "rsid-7": deref(m.ReplyToSessionID), "application/json": deref(m.ContentType),
			} {
				if got != name {
					t.Errorf("got %v where %q was sent", got, name)
				}
			}
			if m.TimeToLive == nil || *m.TimeToLive != 90*time.Second {
				t.Errorf("TimeToLive %v, want 90s", m.TimeToLive)
			}
		}},
		Scenario{Name: "rest-custom-property-typing", Seed: "000 custom property header values are typed: quoted → string or RFC 2616 date, true/false → bool, integer → long, else double", Protocol: Both, Run: func(t *T) {
			q := t.Queue("cf-basic")
			t.restSend(q, []byte("typed"), http.Header{
				"Priority":  {`"High"`},
				"Ordertime": {`"Fri, 04 Mar 2011 08:49:37 GMT"`},
				"Rush":      {"true"},
				"Fragile":   {"false"},
				"Quantity":  {"42"},
				"Price":     {"299.98"},
				"Customer":  {`"12345,ABC"`},
			})
			m := t.ReceiveN(t.Receiver(q, "", nil), 1, 10*time.Second)[0]
			want := map[string]any{
				"Priority": "High", "Ordertime": time.Date(2011, 3, 4, 8, 49, 37, 0, time.UTC), "Rush": true, "Fragile": false,
				"Quantity": int64(42), "Price": 299.98, "Customer": "12345,ABC",
			}
			for k, w := range want {
				v, ok := propValue(m.ApplicationProperties, k)
				if !ok {
					t.Errorf("property %s missing (got %v)", k, m.ApplicationProperties)
					continue
				}
				if wt, isTime := w.(time.Time); isTime {
					if gt, ok := v.(time.Time); !ok || !gt.Equal(wt) {
						t.Errorf("property %s = %#v (%T), want DateTime %v", k, v, v, wt)
					}
					continue
				}
				if v != w {
					t.Errorf("property %s = %#v (%T), want %#v (%T)", k, v, v, w, w)
				}
			}
		}},
		Scenario{Name: "rest-amqp-brokerproperties", Seed: "000 system properties set over AMQP come back in BrokerProperties and Content-Type", Protocol: Both, Run: func(t *T) {
			q := t.Queue("cf-basic")
			t.Send(q, &azservicebus.Message{
				Body: []byte("p"), MessageID: to.Ptr("mid-1"), CorrelationID: to.Ptr("cid-1"), ContentType: to.Ptr("application/xml"),
				Subject: to.Ptr("label-1"), To: to.Ptr("to-1"), ReplyTo: to.Ptr("reply-1"), ReplyToSessionID: to.Ptr("rsid-1"),
				TimeToLive: to.Ptr(time.Hour),
			})
			resp := t.lockedMessage(q)
			bp := t.brokerProps(resp)
			for k, want := range map[string]string{
				"MessageId": "mid-1", "CorrelationId": "cid-1", "Label": "label-1", "To": "to-1", "ReplyTo": "reply-1", "ReplyToSessionId": "rsid-1",
			} {
				if bp.String(k) != want {
					t.Errorf("BrokerProperties %s = %v, want %q", k, bp[k], want)
				}
			}
			if ttl, _ := bp.Float("TimeToLive"); ttl != 3600 {
				t.Errorf("TimeToLive %v, want 3600", bp["TimeToLive"])
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/xml" {
				t.Errorf("Content-Type %q, want the message's application/xml", ct)
			}
		}},
		Scenario{Name: "rest-getonly-properties-ignored", Seed: "000 get-only properties in a request (SequenceNumber, DeliveryCount) are silently ignored", Protocol: REST, Run: func(t *T) {
			q := t.Queue("cf-basic")
			t.restSend(q, []byte("x"), brokerHeader(map[string]any{"SequenceNumber": 12345, "DeliveryCount": 7, "Label": "kept"}))
			bp := t.brokerProps(t.lockedMessage(q))
			if n, _ := bp.Int("DeliveryCount"); n != 1 {
				t.Errorf("DeliveryCount %v, want 1", bp["DeliveryCount"])
			}
			if n, _ := bp.Int("SequenceNumber"); n == 12345 {
				t.Errorf("the sender chose the SequenceNumber")
			}
			if bp.String("Label") != "kept" {
				t.Errorf("Label %v, want kept", bp["Label"])
			}
		}},
		Scenario{Name: "rest-entity-default-ttl", Seed: "003 the entity's default TTL applies to messages sent without one (seen in BrokerProperties.TimeToLive)", Protocol: REST, Run: func(t *T) {
			q := t.Queue("cf-ttl5m")
			t.restSend(q, []byte("x"), nil)
			bp := t.brokerProps(t.lockedMessage(q))
			if ttl, ok := bp.Float("TimeToLive"); !ok || ttl != 300 {
				t.Errorf("TimeToLive %v on a PT5M-default queue, want 300", bp["TimeToLive"])
			}
		}},
	)
}
