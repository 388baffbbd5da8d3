package clustersoak

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// With data groups (Config.Groups), half the soak's senders and receivers
// use a partitioned queue, which the cluster spreads over the groups
// (DESIGN.md, "Partitioned entities spread over the groups"). Each of its
// send loops sends with partition keys of its own, one send at a time, so
// for one key the order of the ledger's numbers among acknowledged sends
// is the order the broker accepted them in. The broker must then have
// stored them in that order in one partition: their broker sequence
// numbers (top 16 bits: the partition) rise with the ledger's numbers,
// and all share one partition. That is what the soak can check of
// per-key order: its receivers compete, so the order of deliveries says
// nothing. A message delivered from the queue it was not sent to is
// counted misrouted.

// partitionedQueueName is the soak's partitioned queue.
const partitionedQueueName = "failover-partitioned"

// keysPerLoop is how many partition keys one send loop takes turns with.
const keysPerLoop = 4

// orderBook records, for the partitioned queue's acknowledged sends,
// each message's key and the broker sequence number it was delivered
// with.
type orderBook struct {
	mu   sync.Mutex // guards the fields below
	key  map[uint64]string
	bseq map[uint64]int64
	// sentTo is the queue each message was sent to.
	sentTo    map[uint64]string
	misrouted int64
}

func newOrderBook() *orderBook {
	return &orderBook{key: map[uint64]string{}, bseq: map[uint64]int64{}, sentTo: map[uint64]string{}}
}

// sending records that seq goes to queue.
func (o *orderBook) sending(seq uint64, queue string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sentTo[seq] = queue
}

// acked records that seq, sent with key, was acknowledged.
func (o *orderBook) acked(seq uint64, key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.key[seq] = key
}

// delivered records a delivery of seq from queue with broker sequence
// number bseq; it reports false when seq was sent to another queue.
func (o *orderBook) delivered(seq uint64, queue string, bseq int64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if to, ok := o.sentTo[seq]; ok && to != queue {
		o.misrouted++
		return false
	}
	if queue != queueName && bseq > 0 {
		o.bseq[seq] = bseq
	}
	return true
}

// OrderTally is what the order book found.
type OrderTally struct {
	Keys       int   // partition keys with a delivered acknowledged message
	Checked    int64 // acknowledged messages delivered, checked for order
	OutOfOrder int64 // stored before a message of the same key acknowledged earlier
	SplitKeys  int64 // keys whose messages were stored in more than one partition
	Misrouted  int64 // delivered from the queue they were not sent to
	Examples   []string
}

// tally checks, per key, that the broker sequence numbers of the
// acknowledged, delivered messages rise with the ledger's numbers and
// name one partition.
func (o *orderBook) tally() OrderTally {
	o.mu.Lock()
	defer o.mu.Unlock()
	byKey := map[string][]uint64{}
	for seq, k := range o.key {
		if _, ok := o.bseq[seq]; ok {
			byKey[k] = append(byKey[k], seq)
		}
	}
	t := OrderTally{Keys: len(byKey), Misrouted: o.misrouted}
	example := func(format string, args ...any) {
		if len(t.Examples) < maxOrderExamples {
			t.Examples = append(t.Examples, fmt.Sprintf(format, args...))
		}
	}
	for k, seqs := range byKey {
		slices.Sort(seqs)
		t.Checked += int64(len(seqs))
		split := false
		for i := 1; i < len(seqs); i++ {
			prev, cur := o.bseq[seqs[i-1]], o.bseq[seqs[i]]
			if cur <= prev {
				t.OutOfOrder++
				example("key %s: seq %d (broker seq %d) acknowledged after seq %d but stored before it (broker seq %d)", k, seqs[i], cur, seqs[i-1], prev)
			}
			if !split && partitionOf(cur) != partitionOf(prev) {
				split = true
				t.SplitKeys++
				example("key %s: seq %d in partition %d, seq %d in partition %d", k, seqs[i-1], partitionOf(prev), seqs[i], partitionOf(cur))
			}
		}
	}
	return t
}

const maxOrderExamples = 5

// partitionOf is the partition a partitioned entity's broker sequence
// number names (its top 16 bits).
func partitionOf(bseq int64) int64 { return bseq >> 48 }

// createPartitioned creates the partitioned queue through node n's HTTP
// management (the emulator's config file has no EnablePartitioning),
// retrying while the cluster answers server busy (the meta group
// electing).
func createPartitioned(ctx context.Context, n *node, key string, sessions bool, timeout time.Duration) error {
	_, port, _ := net.SplitHostPort(n.http)
	cs := "Endpoint=sb://localhost:" + port + "/;SharedAccessKeyName=" + keyName + ";SharedAccessKey=" + key
	adm, err := admin.NewClientFromConnectionString(cs, &admin.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport: plainHTTP{addr: n.http}, Retry: policy.RetryOptions{MaxRetries: -1}}})
	if err != nil {
		return err
	}
	props := &admin.QueueProperties{EnablePartitioning: to.Ptr(true), MaxDeliveryCount: to.Ptr(int32(1000000)),
		LockDuration: to.Ptr("PT1M")}
	if err := waitQueue(ctx, adm, queueName, timeout); err != nil {
		return err
	}
	if err := createQueue(ctx, adm, partitionedQueueName, props, timeout); err != nil || !sessions {
		return err
	}
	sp := *props
	sp.RequiresSession = to.Ptr(true)
	return createQueue(ctx, adm, sessionQueueName, &sp, timeout)
}

// waitQueue waits until queue exists: the meta leader applies the
// config file a moment after the groups are served, and the load would
// otherwise start with sends refused as not found.
func waitQueue(ctx context.Context, adm *admin.Client, queue string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		q, err := adm.GetQueue(cctx, queue, nil)
		cancel()
		if err == nil && q != nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s from the config file not there within %s: %v", queue, timeout, err)
		}
		pause(ctx, 50*time.Millisecond)
	}
}

// createQueue creates queue, retrying while the cluster is busy. A retry
// that finds the queue there succeeds: an attempt before it made the
// queue and its answer was lost (a spread entity's create answers an
// error when a group changes leaders after taking its part, and a retry
// completes what is missing or finds every part made: 409).
func createQueue(ctx context.Context, adm *admin.Client, queue string, props *admin.QueueProperties, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	failedBefore := false // an attempt failed otherwise than as a conflict
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := adm.CreateQueue(cctx, queue, &admin.CreateQueueOptions{Properties: props})
		cancel()
		var re *azcore.ResponseError
		conflict := errors.As(err, &re) && re.StatusCode == http.StatusConflict
		if err == nil || conflict && failedBefore {
			return nil
		}
		failedBefore = failedBefore || !conflict
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("creating %s: %w", queue, err)
		}
		pause(ctx, 100*time.Millisecond)
	}
}

// plainHTTP sends the admin client's requests over plain HTTP to addr.
type plainHTTP struct{ addr string }

func (p plainHTTP) Do(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.URL.Scheme, req.URL.Host = "http", p.addr
	return http.DefaultTransport.RoundTrip(req)
}
