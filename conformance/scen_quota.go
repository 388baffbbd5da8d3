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
// again once some leave it. The scenarios fill a queue with 100 KiB
// messages. Service Bus refuses queues under 1 GB, too much to fill in a
// test, so they run only against an endpoint that caps what an entity
// stores below that (Target.MaxEntityBytes: omnibus --max-entity-size)
// and skip elsewhere.

const quotaDoc = "quotas:"

// quotaBody is the body of the messages that fill the queue.
const quotaBody = 100 << 10

// maxQuotaFill is the largest entity cap the quota scenarios fill.
const maxQuotaFill = 16 << 20

// quotaQueue returns a queue of the smallest size and how many bytes the
// endpoint lets it store, skipping unless that is small enough to fill.
func (t *T) quotaQueue() (string, int64) {
	q := t.Queue("cf-quota")
	limit := t.target.MaxEntityBytes
	if limit <= 0 || limit > maxQuotaFill {
		t.Skipf("filling a queue of Service Bus's smallest size (1 GB) takes too long: the endpoint declares no cap of at most %d MiB on what an entity stores (omnibus --max-entity-size)", maxQuotaFill>>20)
	}
	return q, limit
}

// quotaSends is how many quotaBody messages the scenarios try before
// concluding that a queue capped at limit bytes never fills.
func quotaSends(limit int64) int { return int(limit/quotaBody) + 10 }

// checkFilled checks how many 100 KiB messages a queue capped at limit
// took before it refused one: most of what fits, and no more.
func (t *T) checkFilled(accepted int, limit int64) {
	if fit := limit / quotaBody; int64(accepted) < fit/2 || int64(accepted)*quotaBody > limit {
		t.Fatalf("a queue capped at %d bytes took %d messages of 100 KiB before refusing one, want %d to %d", limit, accepted, fit/2, fit)
	}
}

func init() {
	register(
		Scenario{Name: "quota-exceeded-refuses-send", Seed: quotaDoc + " once a queue reaches MaxSizeInMegabytes, further sends are refused (amqp:resource-limit-exceeded) and nothing of them is stored; it takes messages again once some are removed", Protocol: AMQP, Budget: 2 * time.Minute, Run: func(t *T) {
			q, limit := t.quotaQueue()
			s := t.Sender(q)
			t.Check("refused when full")
			accepted := 0
			var refusal error
			for i := 0; i < quotaSends(limit) && refusal == nil; i++ {
				if err := s.SendMessage(t.ctx, &azservicebus.Message{Body: make([]byte, quotaBody)}, nil); err != nil {
					refusal = err
				} else {
					accepted++
				}
			}
			if refusal == nil {
				t.Fatalf("a queue capped at %d bytes took %d messages of 100 KiB", limit, accepted)
			}
			t.checkFilled(accepted, limit)
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
			q, limit := t.quotaQueue()
			t.live()
			t.Check("refused when full")
			accepted := 0
			var refusal *RESTResponse
			for i := 0; i < quotaSends(limit) && refusal == nil; i++ {
				resp := t.REST(http.MethodPost, q+"/messages", make([]byte, quotaBody), nil)
				if resp.StatusCode == http.StatusCreated {
					accepted++
				} else {
					refusal = resp
				}
			}
			if refusal == nil {
				t.Fatalf("a queue capped at %d bytes took %d messages of 100 KiB over HTTP", limit, accepted)
			}
			t.checkFilled(accepted, limit)
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
