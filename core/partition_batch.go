package core

// Batches sent to partitioned entities.
//
// A batch is the messages a client sends in one operation: one AMQP
// transfer in the batched message format (what every SDK's
// SendMessageBatch / createMessageBatch / send_messages of a list sends),
// or one REST send-batch request. Service Bus stores a batch in one
// partition, chosen by the batch's partition key (the SDKs copy the
// first message's MessageId, SessionId and PartitionKey onto the batch's
// envelope), so on a partitioned entity it refuses a batch whose messages
// do not all have that one key, with amqp:not-allowed (HTTP 400):
//
//	Batching brokered messages with distinct SessionId or PartitionKey is
//	not supported for an entity with partitioning enabled.
//
// and, when the entity also detects duplicates (so that a message without
// a SessionId or PartitionKey is partitioned by its MessageId):
//
//	Batching brokered messages with distinct SessionId, PartitionKey, or
//	MessageId is not supported for an entity with partitioning and
//	duplicate detection enabled.
//
// A message's key is the one that picks its partition (partitionKey):
// its SessionId, else its PartitionKey, else its MessageId when the
// entity detects duplicates, else none. "Distinct" compares those keys,
// none included: a message with a key and one without are distinct, and
// so are two messages without a SessionId or PartitionKey whose
// MessageIds differ on an entity with duplicate detection (every SDK
// gives each message its own MessageId, so there a batch needs a
// PartitionKey or SessionId). A message whose SessionId is another's
// PartitionKey has that other's key. Sources and the reasoning are in
// core/README.md (Partitioned entities).
//
// Only a front knows a batch from messages sent one by one (the AMQP
// front joins pipelined single sends into one Send), so the fronts call
// CheckBatchKeys; core's Send takes messages of any keys and spreads them
// over the partitions.

// CheckBatchKeys returns the error Service Bus answers a batch msgs sent
// to the entity d with when d is partitioned and the messages' partition
// keys are not all the same, nil otherwise (and for a batch of one).
func CheckBatchKeys(d *Entity, msgs []*Message) error {
	if !d.EnablePartitioning || len(msgs) < 2 {
		return nil
	}
	key := partitionKey(d, msgs[0])
	for _, m := range msgs[1:] {
		if partitionKey(d, m) == key {
			continue
		}
		if d.RequiresDuplicateDetection {
			return errf(CodeBadRequest, "Batching brokered messages with distinct SessionId, PartitionKey, or MessageId is not supported for an entity with partitioning and duplicate detection enabled. Entity: '%s'.", d.Path())
		}
		return errf(CodeBadRequest, "Batching brokered messages with distinct SessionId or PartitionKey is not supported for an entity with partitioning enabled. Entity: '%s'.", d.Path())
	}
	return nil
}
