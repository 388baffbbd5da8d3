// Settlement: abandon, dead-letter, defer, lock renewal and lock expiry.

import { test } from "node:test";
import assert from "node:assert/strict";
import { opts, receiveN, receiveNone, receiveNonePastLock, rejectsWithCode, sleep, useBroker } from "./lib.mjs";

const env = useBroker();

test("abandon redelivers with deliveryCount + 1 and merged properties", opts(), async () => {
  const sender = env.client.createSender("abandon");
  const receiver = env.client.createReceiver("abandon");
  await sender.sendMessages({ body: "again", messageId: "again-1", applicationProperties: { keep: "k" } });

  const [first] = await receiveN(receiver, 1);
  assert.ok(first);
  assert.equal(first.deliveryCount, 0, "first delivery");
  await receiver.abandonMessage(first, { retried: "yes", attempt: 1 });

  const [second] = await receiveN(receiver, 1);
  assert.ok(second, "abandoned message is delivered again");
  assert.equal(second.messageId, first.messageId);
  assert.equal(second.sequenceNumber.toString(), first.sequenceNumber.toString());
  assert.equal(second.deliveryCount, 1, "delivery-count on the wire counts the abandoned attempt");
  assert.notEqual(second.lockToken, first.lockToken, "a new delivery has a new lock token");
  assert.equal(second.applicationProperties.keep, "k");
  assert.equal(second.applicationProperties.retried, "yes", "propertiesToModify merged into the message");
  assert.equal(second.applicationProperties.attempt, 1);

  await receiver.abandonMessage(second);
  const [third] = await receiveN(receiver, 1);
  assert.ok(third);
  assert.equal(third.deliveryCount, 2);
  await receiver.completeMessage(third);
  assert.deepEqual(await receiveNone(receiver), []);
  await receiver.close();
  await sender.close();
});

test("exceeding MaxDeliveryCount moves the message to the dead-letter queue", opts(), async () => {
  const sender = env.client.createSender("maxdelivery");
  const receiver = env.client.createReceiver("maxdelivery");
  await sender.sendMessages({ body: "poison", messageId: "poison-1" });
  for (let i = 0; i < 2; i++) {
    const [m] = await receiveN(receiver, 1);
    assert.ok(m, `delivery ${i + 1} of MaxDeliveryCount 2`);
    await receiver.abandonMessage(m);
  }
  assert.deepEqual(await receiveNone(receiver), [], "main queue is empty after MaxDeliveryCount attempts");

  const dlq = env.client.createReceiver("maxdelivery", { subQueueType: "deadLetter" });
  const [d] = await receiveN(dlq, 1);
  assert.ok(d, "message is in maxdelivery/$DeadLetterQueue");
  assert.equal(d.messageId, "poison-1");
  assert.equal(d.deadLetterReason, "MaxDeliveryCountExceeded");
  assert.equal(typeof d.deadLetterErrorDescription, "string");
  await dlq.completeMessage(d);
  await dlq.close();
  await receiver.close();
  await sender.close();
});

test("deadLetterMessage with reason and description; receive from the dead-letter subqueue", opts(), async () => {
  const sender = env.client.createSender("deadletter");
  const receiver = env.client.createReceiver("deadletter");
  await sender.sendMessages({ body: { bad: true }, messageId: "dl-1", applicationProperties: { origin: "test" } });
  const [m] = await receiveN(receiver, 1);
  assert.ok(m);
  await receiver.deadLetterMessage(m, {
    deadLetterReason: "ValidationFailed",
    deadLetterErrorDescription: "field 'x' is missing",
    extra: "added-on-dead-letter",
  });
  assert.deepEqual(await receiveNone(receiver), [], "dead-lettered message left the queue");

  const dlq = env.client.createReceiver("deadletter", { subQueueType: "deadLetter" });
  assert.equal(dlq.entityPath, "deadletter/$DeadLetterQueue");
  const peeked = await dlq.peekMessages(5);
  assert.equal(peeked.length, 1, "peek on the dead-letter queue");
  const [d] = await receiveN(dlq, 1);
  assert.ok(d, "message is in the dead-letter queue");
  assert.equal(d.messageId, "dl-1");
  assert.deepEqual(d.body, { bad: true });
  assert.equal(d.deadLetterReason, "ValidationFailed");
  assert.equal(d.deadLetterErrorDescription, "field 'x' is missing");
  assert.equal(d.applicationProperties.DeadLetterReason, "ValidationFailed");
  assert.equal(d.applicationProperties.origin, "test");
  assert.equal(d.applicationProperties.extra, "added-on-dead-letter");
  await dlq.completeMessage(d);
  assert.deepEqual(await receiveNone(dlq), []);
  await dlq.close();
  await receiver.close();
  await sender.close();
});

test("expired messages go to the dead-letter queue with TTLExpiredException", opts(), async () => {
  const sender = env.client.createSender("expiry");
  const receiver = env.client.createReceiver("expiry");
  await sender.sendMessages({ body: "short-lived", messageId: "ttl-1", timeToLive: 1000 });
  await sleep(1600);
  assert.deepEqual(await receiveNone(receiver), [], "expired message is not delivered");
  const dlq = env.client.createReceiver("expiry", { subQueueType: "deadLetter" });
  const [d] = await receiveN(dlq, 1, 5000);
  assert.ok(d, "expired message dead-lettered (DeadLetteringOnMessageExpiration)");
  assert.equal(d.messageId, "ttl-1");
  assert.equal(d.deadLetterReason, "TTLExpiredException");
  await dlq.completeMessage(d);
  await dlq.close();
  await receiver.close();
  await sender.close();
});

test("defer, then receiveDeferredMessages by sequence number", opts(), async () => {
  const sender = env.client.createSender("defer");
  const receiver = env.client.createReceiver("defer");
  await sender.sendMessages([{ body: "later", messageId: "def-1" }, { body: "now", messageId: "def-2" }]);
  const got = await receiveN(receiver, 2);
  assert.equal(got.length, 2);
  const [later, now] = got;
  await receiver.deferMessage(later, { deferredBy: "test" });
  await receiver.completeMessage(now);
  assert.deepEqual(await receiveNone(receiver), [], "a deferred message is not delivered by receive");

  const [peeked] = await receiver.peekMessages(1, { fromSequenceNumber: later.sequenceNumber });
  assert.ok(peeked, "deferred message is still peekable");
  assert.equal(peeked.state, "deferred");

  const [d] = await receiver.receiveDeferredMessages(later.sequenceNumber);
  assert.ok(d, "receiveDeferredMessages returned the message");
  assert.equal(d.messageId, "def-1");
  assert.equal(d.body, "later");
  assert.equal(d.state, "deferred");
  assert.equal(d.applicationProperties.deferredBy, "test");
  assert.match(d.lockToken ?? "", /^[0-9a-f-]{36}$/, "deferred message carries a lock token");
  assert.ok(d.lockedUntilUtc > new Date(), "deferred message is locked");
  await receiver.completeMessage(d);

  await rejectsWithCode(assert, receiver.receiveDeferredMessages(later.sequenceNumber), "MessageNotFound");
  await receiver.close();
  await sender.close();
});

test("receiveDeferredMessages with several sequence numbers, in receiveAndDelete", opts(), async () => {
  const sender = env.client.createSender("defer");
  const receiver = env.client.createReceiver("defer");
  await sender.sendMessages([1, 2, 3].map((i) => ({ body: i, messageId: `multi-${i}` })));
  const got = await receiveN(receiver, 3);
  assert.equal(got.length, 3);
  for (const m of got) await receiver.deferMessage(m);

  const rnd = env.client.createReceiver("defer", { receiveMode: "receiveAndDelete" });
  const seqs = got.map((m) => m.sequenceNumber);
  const deferred = await rnd.receiveDeferredMessages(seqs);
  assert.deepEqual(deferred.map((m) => m.body).sort(), [1, 2, 3]);
  assert.deepEqual(await receiver.peekMessages(10, { fromSequenceNumber: seqs[0] }), [], "receiveAndDelete removed them");
  await rnd.close();
  await receiver.close();
  await sender.close();
});

test("renewMessageLock extends the lock past the LockDuration", opts(), async () => {
  const sender = env.client.createSender("lockrenew");
  const receiver = env.client.createReceiver("lockrenew", { maxAutoLockRenewalDurationInMs: 0 });
  await sender.sendMessages({ body: "renew-me" });
  const [m] = await receiveN(receiver, 1);
  assert.ok(m);
  const original = m.lockedUntilUtc;
  const lockMs = original.getTime() - m.enqueuedTimeUtc.getTime();
  assert.ok(lockMs > 3000 && lockMs < 7000, `LockDuration PT5S gives ~5 s, got ${lockMs} ms`);

  await sleep(1500);
  const renewed = await receiver.renewMessageLock(m);
  assert.ok(renewed instanceof Date);
  assert.ok(renewed > original, `renewed ${renewed.toISOString()} > original ${original.toISOString()}`);
  assert.equal(m.lockedUntilUtc.getTime(), renewed.getTime(), "the SDK stores the new expiry on the message");

  // Outlive the original lock; the renewed one must still hold.
  await sleep(Math.max(0, original.getTime() - Date.now()) + 800);
  await receiver.completeMessage(m);
  assert.deepEqual(await receiveNone(receiver), []);
  await receiver.close();
  await sender.close();
});

test("an expired lock fails completion with MessageLockLost and the message comes back", opts(), async () => {
  const sender = env.client.createSender("lockexpiry");
  const receiver = env.client.createReceiver("lockexpiry", { maxAutoLockRenewalDurationInMs: 0 });
  await sender.sendMessages({ body: "slow" });
  const [m] = await receiveN(receiver, 1);
  assert.ok(m);
  await sleep(Math.max(0, m.lockedUntilUtc.getTime() - Date.now()) + 1000);
  await rejectsWithCode(assert, receiver.completeMessage(m), "MessageLockLost");
  await rejectsWithCode(assert, receiver.renewMessageLock(m), "MessageLockLost");

  const [again] = await receiveN(receiver, 1);
  assert.ok(again, "message is available again after its lock expired");
  assert.equal(again.deliveryCount, 1, "lock expiry counts as a delivery attempt");
  await receiver.completeMessage(again);
  await receiver.close();
  await sender.close();
});

test("auto lock renewal keeps a message locked while the handler runs", opts(), async () => {
  const sender = env.client.createSender("lockrenew");
  const receiver = env.client.createReceiver("lockrenew", { maxAutoLockRenewalDurationInMs: 20_000 });
  await sender.sendMessages({ body: "auto", messageId: "auto-1" });
  const [m] = await receiveN(receiver, 1);
  assert.ok(m);
  const original = m.lockedUntilUtc;
  await sleep(Math.max(0, original.getTime() - Date.now()) + 1000);
  assert.ok(m.lockedUntilUtc > original, "the SDK's auto-renewer (renew-lock on $management) moved the lock");
  await receiver.completeMessage(m);
  await receiver.close();
  await sender.close();
});

test("settling after the receive link closed goes through $management update-disposition", opts(), async () => {
  // The SDK settles a non-session message whose link is gone by lock token
  // on $management, so locks must outlive the link that delivered them.
  const sender = env.client.createSender("mgmt-complete-5s");
  await sender.sendMessages([
    { body: "done-later", messageId: "mgmt-complete" },
    { body: "give-back", messageId: "mgmt-abandon" },
  ]);
  const first = env.client.createReceiver("mgmt-complete-5s", { maxAutoLockRenewalDurationInMs: 0 });
  const got = await receiveN(first, 2);
  assert.equal(got.length, 2);
  await first.close();

  const second = env.client.createReceiver("mgmt-complete-5s", { maxAutoLockRenewalDurationInMs: 0 });
  assert.deepEqual(await receiveNone(second, 700), [], "closing the link did not release the locks");
  const byId = Object.fromEntries(got.map((m) => [m.messageId, m]));
  await second.completeMessage(byId["mgmt-complete"]);
  await second.abandonMessage(byId["mgmt-abandon"]);
  const [back] = await receiveN(second, 1);
  assert.ok(back, "the abandoned message is available again");
  assert.equal(back.messageId, "mgmt-abandon");
  assert.equal(back.deliveryCount, 1);
  await second.completeMessage(back);
  // Past both 5 s locks: a complete the broker ignored would come back then.
  const lastLock = new Date(Math.max(byId["mgmt-complete"].lockedUntilUtc, back.lockedUntilUtc));
  assert.deepEqual(await receiveNonePastLock(second, lastLock), [], "the completed ones are gone");
  await second.close();
  await sender.close();
});
