package conformance

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/omnibusmq/omnibus/core/sas"
)

// The REST runtime API: seed 001 (peek-lock), seed 000 (headers and
// properties), rest.md §0-§2 and §5.

func init() {
	register(
		Scenario{Name: "rest-send-201", Seed: "rest.md §1.3 Send Message answers 201 Created; the body is stored unchanged", Protocol: REST, Run: func(t *T) {
			q := t.Queue("cf-basic")
			t.restSend(q, []byte("over http"), http.Header{"Content-Type": {"text/plain"}})
			m := t.ReceiveN(t.Receiver(q, "", nil), 1, 10*time.Second)[0]
			if string(m.Body) != "over http" {
				t.Errorf("body %q, want %q", m.Body, "over http")
			}
			if deref(m.ContentType) != "text/plain" {
				t.Errorf("ContentType %v, want the request's Content-Type text/plain", deref(m.ContentType))
			}
		}},
		Scenario{Name: "rest-send-batch-201", Seed: "000 a batch carries BrokerProperties and UserProperties in its JSON body (IsBodyBase64 for binary)", Protocol: REST, Run: func(t *T) {
			q := t.Queue("cf-basic")
			batch := []map[string]any{
				{"Body": "first"},
				{"Body": "second", "BrokerProperties": map[string]any{"Label": "L2", "MessageId": "m2"}, "UserProperties": map[string]any{"color": "red", "n": 5, "ok": true}},
				{"Body": base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 255}), "IsBodyBase64": true},
			}
			body, _ := json.Marshal(batch)
			t.restSend(q, body, http.Header{"Content-Type": {"application/vnd.microsoft.servicebus.json"}})
			got := t.ReceiveN(t.Receiver(q, "", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete}), 3, 15*time.Second)
			t.expectBodies(got, "first", "second", string([]byte{0, 1, 2, 255}))
			m := got[1]
			if deref(m.Subject) != "L2" || m.MessageID != "m2" {
				t.Errorf("second message Label %v MessageId %q, want L2 and m2", deref(m.Subject), m.MessageID)
			}
			if v, _ := propValue(m.ApplicationProperties, "color"); v != "red" {
				t.Errorf("UserProperties color = %#v, want \"red\"", v)
			}
			if v, _ := propValue(m.ApplicationProperties, "ok"); v != true {
				t.Errorf("UserProperties ok = %#v, want true", v)
			}
			if v, _ := propValue(m.ApplicationProperties, "n"); fmt.Sprint(v) != "5" {
				t.Errorf("UserProperties n = %#v, want 5", v)
			}
		}},
		Scenario{Name: "rest-peeklock-201-brokerproperties", Seed: "001 peek-lock answers 201 with BrokerProperties (LockToken, SequenceNumber, ...) and Location .../messages/{seq}/{lock}", Protocol: REST, Run: func(t *T) {
			q := t.Queue("cf-basic")
			t.Send(q, &azservicebus.Message{Body: []byte("locked"), MessageID: to.Ptr("mid-rest"), TimeToLive: to.Ptr(90 * time.Second)})
			resp := t.lockedMessage(q)
			if string(resp.Body) != "locked" {
				t.Errorf("body %q", resp.Body)
			}
			bp := t.brokerProps(resp)
			lock := bp.String("LockToken")
			if _, err := parseUUID(lock); err != nil {
				t.Errorf("LockToken: %v", err)
			}
			if until, err := bp.Time("LockedUntilUtc"); err != nil || !until.After(time.Now().Add(-2*time.Second)) {
				t.Errorf("LockedUntilUtc %q (%v), want an RFC 1123 time in the future", bp.String("LockedUntilUtc"), err)
			}
			if _, err := bp.Time("EnqueuedTimeUtc"); err != nil {
				t.Errorf("EnqueuedTimeUtc %q: %v", bp.String("EnqueuedTimeUtc"), err)
			}
			seq, ok := bp.Int("SequenceNumber")
			if !ok {
				t.Fatalf("SequenceNumber %v is not an integer", bp["SequenceNumber"])
			}
			if n, _ := bp.Int("DeliveryCount"); n != 1 {
				t.Errorf("DeliveryCount %v, want 1", bp["DeliveryCount"])
			}
			if bp.String("State") != "Active" || bp.String("MessageId") != "mid-rest" {
				t.Errorf("State %q MessageId %q, want Active and mid-rest", bp.String("State"), bp.String("MessageId"))
			}
			if ttl, _ := bp.Float("TimeToLive"); ttl != 90 {
				t.Errorf("TimeToLive %v, want 90 (seconds)", bp["TimeToLive"])
			}
			want := "/" + messagePath(strings.ToLower(q), seq, lock)
			if loc := resp.Header.Get("Location"); !strings.HasSuffix(loc, want) {
				t.Errorf("Location %q, want …%s", loc, want)
			}
		}},
		Scenario{Name: "rest-peeklock-property-headers-typed", Seed: "000 custom properties come back as headers: strings and dates quoted, numbers and booleans bare", Protocol: Both, Run: func(t *T) {
			q := t.Queue("cf-basic")
			at := time.Date(2011, 3, 4, 8, 49, 37, 0, time.UTC)
			t.Send(q, &azservicebus.Message{Body: []byte("x"), ApplicationProperties: map[string]any{
				"Priority": "High", "OrderTime": at, "Quantity": int64(42), "Price": 299.98, "Rush": true}})
			resp := t.lockedMessage(q)
			for name, want := range map[string]string{
				"Priority": `"High"`, "OrderTime": `"Fri, 04 Mar 2011 08:49:37 GMT"`, "Quantity": "42", "Price": "299.98", "Rush": "true",
			} {
				if got, ok := headerValue(resp.Header, name); !ok || got != want {
					t.Errorf("header %s: %q, want %s", name, got, want)
				}
			}
		}},
		Scenario{Name: "rest-peeklock-empty-204", Seed: "001 204: no message was available within the specified timeout", Protocol: REST, Run: func(t *T) {
			q := t.Queue("cf-basic")
			start := time.Now()
			resp := t.peekLock(q, 2)
			t.expectStatus(resp, http.StatusNoContent, "peek-lock on an empty queue")
			if d := time.Since(start); d < 1500*time.Millisecond || d > 10*time.Second {
				t.Errorf("204 after %s, want after about the 2 s timeout", d.Round(time.Millisecond))
			}
		}},
		Scenario{Name: "rest-peeklock-long-poll-wakes", Seed: "001 a waiting peek-lock returns the message that arrives within its timeout", Protocol: REST, Run: func(t *T) {
			q := t.Queue("cf-basic")
			s := t.Sender(q)
			go func() {
				select {
				case <-time.After(time.Second):
					_ = s.SendMessage(t.ctx, Text("late"), nil)
				case <-t.ctx.Done():
				}
			}()
			start := time.Now()
			resp := t.peekLock(q, 20)
			t.expectStatus(resp, http.StatusCreated, "waiting peek-lock")
			if d := time.Since(start); d > 8*time.Second {
				t.Errorf("the message sent after 1 s was returned after %s", d.Round(time.Millisecond))
			}
		}},
		Scenario{Name: "rest-receive-and-delete-200", Seed: "rest.md §1.6 receive-and-delete answers 200 with the message and no Location", Protocol: REST, Run: func(t *T) {
			q := t.Queue("cf-basic")
			t.Send(q, Text("gone"))
			resp := t.REST(http.MethodDelete, q+"/messages/head?timeout=10", nil, nil)
			t.expectStatus(resp, http.StatusOK, "receive-and-delete")
			if string(resp.Body) != "gone" || resp.Header.Get("Location") != "" {
				t.Errorf("body %q Location %q, want the message and no Location", resp.Body, resp.Header.Get("Location"))
			}
			if bp := t.brokerProps(resp); bp.String("LockToken") != "" {
				t.Errorf("a destructive read carries LockToken %q", bp.String("LockToken"))
			}
			t.expectStatus(t.peekLock(q, 1), http.StatusNoContent, "peek-lock after receive-and-delete")
		}},
		Scenario{Name: "rest-complete-200", Seed: "001 to complete processing the receiver deletes the message with its lock (DELETE Location: 200)", Protocol: REST,
			Detects: []Detection{{FaultIgnoreComplete, "gone"}}, Run: func(t *T) {
				q := t.Queue("cf-basic")
				t.Send(q, Text("done"))
				loc := t.location(t.lockedMessage(q))
				t.expectStatus(t.REST(http.MethodDelete, loc, nil, nil), http.StatusOK, "complete")
				t.Check("gone")
				t.expectNothingStored(t.Receiver(q, "", nil), "a completed message must be gone")
			}},
		Scenario{Name: "rest-unlock-redelivers", Seed: "001 unlock (PUT Location: 200) makes the message available again, DeliveryCount 2", Protocol: REST, Run: func(t *T) {
			q := t.Queue("cf-basic")
			t.Send(q, Text("again"))
			loc := t.location(t.lockedMessage(q))
			t.expectStatus(t.REST(http.MethodPut, loc, nil, nil), http.StatusOK, "unlock")
			bp := t.brokerProps(t.lockedMessage(q))
			if n, _ := bp.Int("DeliveryCount"); n != 2 {
				t.Fatalf("after unlock DeliveryCount %v, want 2", bp["DeliveryCount"])
			}
		}},
		Scenario{Name: "rest-renew-extends", Seed: "rest.md §1.7 renew lock (POST Location: 200) keeps the message locked past its first expiry", Protocol: REST, Run: func(t *T) {
			q := lock5s(t)
			t.Send(q, Text("long job"))
			resp := t.lockedMessage(q)
			until, err := t.brokerProps(resp).Time("LockedUntilUtc")
			t.must(err, "LockedUntilUtc")
			loc := t.location(resp)
			wait(t, 3*time.Second)
			renewed := t.REST(http.MethodPost, loc, nil, nil)
			t.expectStatus(renewed, http.StatusOK, "renew")
			if renewed.Header.Get("BrokerProperties") != "" {
				if nu, err := t.brokerProps(renewed).Time("LockedUntilUtc"); err == nil && !nu.After(until) {
					t.Errorf("renew reports LockedUntilUtc %v, not after %v", nu, until)
				}
			}
			wait(t, time.Until(until)+time.Second) // past the first lock, 2 s before the renewed one ends
			t.expectStatus(t.peekLock(q, 1), http.StatusNoContent, "peek-lock while the renewed lock holds")
			t.expectStatus(t.REST(http.MethodDelete, loc, nil, nil), http.StatusOK, "complete with the renewed lock")
		}},
		Scenario{Name: "rest-expired-lock-404", Seed: "rest.md §0.2 completing with an expired lock answers 404", Protocol: REST,
			Detects: []Detection{{FaultIgnoreLockExpiry, "complete after lock expiry"}}, Run: func(t *T) {
				q := lock5s(t)
				t.Send(q, Text("slow"))
				resp := t.lockedMessage(q)
				until, err := t.brokerProps(resp).Time("LockedUntilUtc")
				t.must(err, "LockedUntilUtc")
				wait(t, time.Until(until)+2*time.Second)
				t.Check("complete after lock expiry")
				t.expectStatus(t.REST(http.MethodDelete, t.location(resp), nil, nil), http.StatusNotFound, "complete after the lock expired")
				t.Check("redelivered after lock expiry")
				bp := t.brokerProps(t.lockedMessage(q))
				if n, _ := bp.Int("DeliveryCount"); n != 2 {
					t.Errorf("redelivered after lock expiry with DeliveryCount %v, want 2", bp["DeliveryCount"])
				}
			}},
		Scenario{Name: "rest-unknown-lock-404", Seed: "rest.md §1.2 unlock/complete/renew of an unknown message or lock answers 404", Protocol: REST, Run: func(t *T) {
			q := t.Queue("cf-basic")
			t.Send(q, Text("x"))
			bp := t.brokerProps(t.lockedMessage(q))
			seq, _ := bp.Int("SequenceNumber")
			other := uuidString([16]byte{1, 2, 3, 4, 5, 6, 0x47, 8, 0x89, 10, 11, 12, 13, 14, 15, 16})
			for _, m := range []string{http.MethodDelete, http.MethodPut, http.MethodPost} {
				t.expectStatus(t.REST(m, messagePath(q, seq, other), nil, nil), http.StatusNotFound, m+" with a wrong lock token")
			}
			t.expectStatus(t.REST(http.MethodDelete, messagePath(q, seq+1000, other), nil, nil), http.StatusNotFound, "DELETE of an unknown sequence number")
		}},
		Scenario{Name: "rest-unknown-entity-410", Seed: "001 410: the specified queue or subscription does not exist", Protocol: REST, Run: func(t *T) {
			missing := "cf-missing-" + suffix()
			t.expectStatus(t.REST(http.MethodPost, missing+"/messages", []byte("x"), nil), http.StatusGone, "send to a missing queue")
			t.expectStatus(t.peekLock(missing, 1), http.StatusGone, "peek-lock on a missing queue")
			t.expectStatus(t.REST(http.MethodDelete, missing+"/messages/head?timeout=1", nil, nil), http.StatusGone, "receive-and-delete on a missing queue")
		}},
		Scenario{Name: "rest-unauthorized-401", Seed: "001 401: authorization failure (no token, or a token with a wrong signature)", Protocol: REST, Run: func(t *T) {
			q := t.Queue("cf-basic")
			t.expectStatus(t.RESTAuth(http.MethodPost, q+"/messages", []byte("x"), nil, ""), http.StatusUnauthorized, "send without Authorization")
			tg := t.target
			bad := sas.Sign("http://"+tg.cs.Host+"/"+q, tg.cs.SharedAccessKeyName, "bm90IHRoZSBrZXk=", time.Now().Add(time.Hour))
			t.expectStatus(t.RESTAuth(http.MethodPost, q+"/messages", []byte("x"), nil, bad), http.StatusUnauthorized, "send with a wrongly signed token")
			t.expectStatus(t.RESTAuth(http.MethodPost, q+"/messages/head?timeout=1", nil, nil, bad), http.StatusUnauthorized, "peek-lock with a wrongly signed token")
			t.ReceiveNone(t.Receiver(q, "", nil), time.Second, "an unauthorised send must not be stored")
		}},
		Scenario{Name: "rest-message-too-large-403", Seed: "rest.md §1.2 403: the message is larger than the entity allows", Protocol: REST, Run: func(t *T) {
			q := t.Queue("cf-basic")
			resp := t.REST(http.MethodPost, q+"/messages", make([]byte, 1100*1024), nil)
			t.expectStatus(resp, http.StatusForbidden, "send of 1.1 MB to a queue with the default maximum")
		}},
		Scenario{Name: "rest-peeklock-subscription", Seed: "001 peek-lock on {topic}/subscriptions/{name}/messages/head; complete through its Location", Protocol: REST, Run: func(t *T) {
			tp := t.Topic("cf-topic")
			t.restSend(tp, []byte("to all"), nil)
			resp := t.lockedMessage(tp + "/subscriptions/a")
			if string(resp.Body) != "to all" {
				t.Errorf("body %q", resp.Body)
			}
			loc := t.location(resp)
			if !strings.Contains(strings.ToLower(loc), "/subscriptions/a/messages/") {
				t.Errorf("Location %q does not name the subscription", loc)
			}
			t.expectStatus(t.REST(http.MethodDelete, loc, nil, nil), http.StatusOK, "complete on the subscription")
			t.expectStatus(t.peekLock(tp+"/subscriptions/a", 1), http.StatusNoContent, "subscription a after complete")
			t.expectStatus(t.peekLock(tp+"/subscriptions/b", 5), http.StatusCreated, "subscription b keeps its own copy")
		}},
		Scenario{Name: "rest-peeklock-deadletter-queue", Seed: "rest.md §1.1 the dead-letter subqueue is received over REST at {queue}/$DeadLetterQueue", Protocol: Both,
			Detects: []Detection{{FaultDropDeadLetters, "in the dead-letter subqueue"}}, Run: func(t *T) {
				q := t.Queue("cf-basic")
				t.Send(q, Text("poison"))
				r := t.Receiver(q, "", nil)
				t.must(r.DeadLetterMessage(t.ctx, t.ReceiveN(r, 1, 10*time.Second)[0], &azservicebus.DeadLetterOptions{Reason: to.Ptr("bad-input")}), "dead-letter")
				t.Check("in the dead-letter subqueue")
				resp := t.lockedMessage(q + "/$DeadLetterQueue")
				t.Check("kept its body and reason")
				if string(resp.Body) != "poison" {
					t.Errorf("DLQ body %q", resp.Body)
				}
				if v, _ := headerValue(resp.Header, "DeadLetterReason"); v != `"bad-input"` {
					t.Errorf("DeadLetterReason header %q, want \"bad-input\" (quoted string)", v)
				}
				t.expectStatus(t.REST(http.MethodDelete, t.location(resp), nil, nil), http.StatusOK, "complete a dead letter over REST")
				t.ReceiveNone(t.DLQ(q, ""), time.Second, "the completed dead letter must be gone")
			}},
		Scenario{Name: "rest-scheduled-enqueue-time", Seed: "000 ScheduledEnqueueTimeUtc in BrokerProperties delays the message", Protocol: REST,
			Detects: []Detection{{FaultIgnoreSchedule, "invisible before its time"}}, Run: func(t *T) {
				q := t.Queue("cf-basic")
				at := time.Now().Add(4 * time.Second).UTC()
				t.restSend(q, []byte("later"), brokerHeader(map[string]any{"ScheduledEnqueueTimeUtc": at.Format(http.TimeFormat)}))
				t.Check("invisible before its time")
				t.expectStatus(t.peekLock(q, 1), http.StatusNoContent, "peek-lock before the scheduled time")
				t.Check("delivered at its time")
				resp := t.peekLock(q, 15)
				t.expectStatus(resp, http.StatusCreated, "peek-lock after the scheduled time")
				if time.Now().Before(at.Truncate(time.Second).Add(-time.Second)) {
					t.Errorf("delivered at %v, before its schedule %v", time.Now(), at)
				}
			}},
	)
}
