package conformance

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"
)

// The entity quota (Service Bus quotas, "Queue or topic size"): an
// entity's MaxSizeInMegabytes bounds what it stores; once full,
// "subsequent incoming messages are rejected, and an exception is
// received by the calling code" (QuotaExceeded: AMQP
// amqp:resource-limit-exceeded, HTTP 403), and the entity takes messages
// again once some leave it. The scenarios fill a 1 MB queue with 100 KiB
// messages; a cloud namespace refuses queues under 1 GB, and the
// emulator's Config.json cannot set the size, so both skip them.

const quotaDoc = "quotas:"

// quotaBody is the body of the messages that fill the 1 MB queue: ten of
// them fit at most, with room for the overhead an endpoint counts.
const quotaBody = 100 << 10

// quotaQueue returns a 1 MB queue, skipping when the endpoint refuses
// MaxSizeInMegabytes 1.
func (t *T) quotaQueue() string {
	q, err := t.tryQueue("cf-quota1mb")
	if err != nil {
		t.Skipf("the endpoint refuses MaxSizeInMegabytes 1: %v", err)
	}
	return q
}

// checkFilled checks how many 100 KiB messages a 1 MB queue took before
// it refused one: some, and no more than fit.
func (t *T) checkFilled(accepted int) {
	if accepted < 5 || accepted*quotaBody > 1<<20 {
		t.Fatalf("the 1 MB queue took %d messages of 100 KiB before refusing one, want 5 to 10", accepted)
	}
}

func init() {
	register(
		Scenario{Name: "quota-exceeded-refuses-send", Seed: quotaDoc + " once a queue reaches MaxSizeInMegabytes, further sends are refused (amqp:resource-limit-exceeded) and nothing of them is stored; it takes messages again once some are removed", Protocol: AMQP, Budget: 2 * time.Minute, Run: func(t *T) {
			q := t.quotaQueue()
			s := t.Sender(q)
			t.Check("refused when full")
			accepted := 0
			var refusal error
			for i := 0; i < 20 && refusal == nil; i++ {
				if err := s.SendMessage(t.ctx, &azservicebus.Message{Body: make([]byte, quotaBody)}, nil); err != nil {
					refusal = err
				} else {
					accepted++
				}
			}
			if refusal == nil {
				t.Fatalf("a 1 MB queue took 20 messages of 100 KiB (2,000 KiB)")
			}
			t.checkFilled(accepted)
			var ae *amqp.Error
			if !errors.As(refusal, &ae) || ae.Condition != amqp.ErrCondResourceLimitExceeded {
				t.Fatalf("send to a full queue: %v, want amqp:resource-limit-exceeded", refusal)
			}
			if !strings.Contains(strings.ToLower(ae.Description), "maximum entity size") {
				t.Errorf("description %q, want Service Bus's \"The maximum entity size has been reached or exceeded ...\"", ae.Description)
			}

			t.Check("nothing of a refused send stored")
			r := t.Receiver(q, "", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
			got := t.ReceiveN(r, accepted, 30*time.Second)
			if extra := t.receiveUpTo(r, 1, 2*time.Second); len(extra) > 0 {
				t.Fatalf("received %d messages and then more, although only %d sends were accepted", len(got)+len(extra), accepted)
			}

			t.Check("accepted again once emptied")
			t.must(s.SendMessage(t.ctx, &azservicebus.Message{Body: make([]byte, quotaBody)}, nil), "send to the emptied queue")
		}},
		Scenario{Name: "rest-quota-exceeded-403", Seed: quotaDoc + " once a queue reaches MaxSizeInMegabytes, further sends over HTTP are refused with 403", Protocol: REST, Budget: 2 * time.Minute, Run: func(t *T) {
			q := t.quotaQueue()
			t.live()
			t.Check("refused when full")
			accepted := 0
			var refusal *RESTResponse
			for i := 0; i < 20 && refusal == nil; i++ {
				resp := t.REST(http.MethodPost, q+"/messages", make([]byte, quotaBody), nil)
				if resp.StatusCode == http.StatusCreated {
					accepted++
				} else {
					refusal = resp
				}
			}
			if refusal == nil {
				t.Fatalf("a 1 MB queue took 20 messages of 100 KiB (2,000 KiB) over HTTP")
			}
			t.checkFilled(accepted)
			t.expectStatus(refusal, http.StatusForbidden, "send to a full queue")
			if !strings.Contains(strings.ToLower(string(refusal.Body)), "maximum entity size") {
				t.Errorf("body %s, want Service Bus's \"The maximum entity size has been reached or exceeded ...\"", oneLine(string(refusal.Body), 300))
			}

			t.Check("accepted again after a receive")
			t.expectStatus(t.REST(http.MethodDelete, q+"/messages/head?timeout=10", nil, nil), http.StatusOK, "receive and delete")
			t.restSend(q, make([]byte, quotaBody), nil)
		}},
	)
}
