package core_test

import (
	"strings"
	"testing"

	"github.com/omnibusmq/omnibus/core"
)

// TestCheckBatchKeys: on a partitioned entity a batch's messages must
// share the key that picks their partition (SessionId, else PartitionKey,
// else MessageId with duplicate detection), none counting as a key of its
// own; any other entity takes any batch.
func TestCheckBatchKeys(t *testing.T) {
	m := func(sid, pk, id string) *core.Message {
		msg := &core.Message{SessionID: sid, PartitionKey: pk}
		if id != "" {
			msg.MessageID = id
		}
		return msg
	}
	plain := &core.Entity{Kind: core.KindQueue, Name: "q"}
	parted := &core.Entity{Kind: core.KindQueue, Name: "pq", EnablePartitioning: true}
	dedup := &core.Entity{Kind: core.KindQueue, Name: "pdq", EnablePartitioning: true, RequiresDuplicateDetection: true}
	for _, c := range []struct {
		name string
		d    *core.Entity
		msgs []*core.Message
		want string // a part of the refusal, "" when taken
	}{
		{"one message", parted, []*core.Message{m("", "a", "")}, ""},
		{"one partition key", parted, []*core.Message{m("", "a", "1"), m("", "a", "2")}, ""},
		{"no keys", parted, []*core.Message{m("", "", "1"), m("", "", "2")}, ""},
		{"session id equal to partition key", parted, []*core.Message{m("a", "", ""), m("", "a", "")}, ""},
		{"two partition keys", parted, []*core.Message{m("", "a", ""), m("", "b", "")}, "distinct SessionId or PartitionKey"},
		{"two session ids", parted, []*core.Message{m("s", "", ""), m("t", "", "")}, "distinct SessionId or PartitionKey"},
		{"a key, then none", parted, []*core.Message{m("", "a", ""), m("", "", "")}, "distinct SessionId or PartitionKey"},
		{"the third differs", parted, []*core.Message{m("", "a", ""), m("", "a", ""), m("", "b", "")}, "distinct SessionId or PartitionKey"},
		{"two message ids, duplicate detection", dedup, []*core.Message{m("", "", "1"), m("", "", "2")}, "distinct SessionId, PartitionKey, or MessageId"},
		{"one message id, duplicate detection", dedup, []*core.Message{m("", "", "1"), m("", "", "1")}, ""},
		{"one partition key, duplicate detection", dedup, []*core.Message{m("", "k", "1"), m("", "k", "2")}, ""},
		{"two partition keys, not partitioned", plain, []*core.Message{m("", "a", ""), m("", "b", "")}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := core.CheckBatchKeys(c.d, c.msgs)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || core.CodeOf(err) != core.CodeBadRequest):
				t.Fatalf("got %v, want a bad request naming %q", err, c.want)
			}
		})
	}
}
