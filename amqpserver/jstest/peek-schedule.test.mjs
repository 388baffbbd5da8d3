// peekMessages, scheduleMessages and cancelScheduledMessages ($management operations).

import { test } from "node:test";
import assert from "node:assert/strict";
import { opts, receiveN, receiveNone, useBroker } from "./lib.mjs";

const env = useBroker();

test("peekMessages pages through the queue without locking", opts(), async () => {
  const sender = env.client.createSender("peek");
  const receiver = env.client.createReceiver("peek");
  assert.deepEqual(await receiver.peekMessages(5), [], "peek on an empty queue (204) gives []");

  await sender.sendMessages(Array.from({ length: 5 }, (_, i) => ({ body: `p${i}`, messageId: `peek-${i}` })));
  const page1 = await receiver.peekMessages(3);
  assert.deepEqual(page1.map((m) => m.body), ["p0", "p1", "p2"]);
  for (const m of page1) {
    assert.equal(m.lockToken, undefined, "peeked messages carry no lock");
    assert.equal(m.state, "active");
    assert.ok(m.enqueuedTimeUtc instanceof Date);
  }
  const seqs = page1.map((m) => m.sequenceNumber.toNumber());
  assert.ok(seqs[0] < seqs[1] && seqs[1] < seqs[2], `ascending sequence numbers ${seqs}`);

  const page2 = await receiver.peekMessages(3);
  assert.deepEqual(page2.map((m) => m.body), ["p3", "p4"], "the next peek continues after the last peeked message");

  const fromStart = await receiver.peekMessages(10, { fromSequenceNumber: page1[0].sequenceNumber });
  assert.deepEqual(fromStart.map((m) => m.messageId), ["peek-0", "peek-1", "peek-2", "peek-3", "peek-4"]);
  const fromThird = await receiver.peekMessages(10, { fromSequenceNumber: page1[2].sequenceNumber });
  assert.deepEqual(fromThird.map((m) => m.body), ["p2", "p3", "p4"]);

  const got = await receiveN(receiver, 5);
  assert.equal(got.length, 5, "peeking did not lock or remove anything");
  for (const m of got) {
    assert.equal(m.deliveryCount, 0, "peek is not a delivery");
    await receiver.completeMessage(m);
  }
  assert.deepEqual(await receiver.peekMessages(5, { fromSequenceNumber: page1[0].sequenceNumber }), []);
  await receiver.close();
  await sender.close();
});

test("peek shows locked messages too", opts(), async () => {
  const sender = env.client.createSender("peek");
  const receiver = env.client.createReceiver("peek");
  await sender.sendMessages({ body: "locked", messageId: "locked-1" });
  const [m] = await receiveN(receiver, 1);
  assert.ok(m);
  const [p] = await receiver.peekMessages(1, { fromSequenceNumber: m.sequenceNumber });
  assert.ok(p, "a locked message is still visible to peek");
  assert.equal(p.body, "locked");
  await receiver.completeMessage(m);
  await receiver.close();
  await sender.close();
});

test("scheduleMessages enqueues at the scheduled time", opts(), async () => {
  const sender = env.client.createSender("schedule");
  const receiver = env.client.createReceiver("schedule");
  const at = new Date(Date.now() + 2500);
  const seqs = await sender.scheduleMessages({ body: "scheduled", messageId: "sch-1" }, at);
  assert.equal(seqs.length, 1);
  assert.ok(seqs[0].toNumber() >= 1, "a sequence number comes back");

  const [p] = await receiver.peekMessages(1, { fromSequenceNumber: seqs[0] });
  assert.ok(p, "scheduled message is peekable");
  assert.equal(p.state, "scheduled");
  assert.equal(p.sequenceNumber.toString(), seqs[0].toString());
  assert.equal(p.scheduledEnqueueTimeUtc?.getTime(), at.getTime());

  assert.deepEqual(await receiveNone(receiver, 1000), [], "not delivered before its time");
  const [m] = await receiveN(receiver, 1, 8000);
  assert.ok(m, "delivered after its time");
  assert.ok(Date.now() >= at.getTime() - 200, "not early");
  assert.equal(m.messageId, "sch-1");
  assert.equal(m.scheduledEnqueueTimeUtc?.getTime(), at.getTime());
  assert.equal(m.state, "active");
  await receiver.completeMessage(m);
  await receiver.close();
  await sender.close();
});

test("sendMessages with scheduledEnqueueTimeUtc schedules too", opts(), async () => {
  const sender = env.client.createSender("schedule");
  const receiver = env.client.createReceiver("schedule");
  const at = new Date(Date.now() + 1500);
  await sender.sendMessages({ body: "via-annotation", messageId: "via-ann-1", scheduledEnqueueTimeUtc: at });
  assert.deepEqual(await receiveNone(receiver, 700), [], "not delivered before its time");
  const [m] = await receiveN(receiver, 1, 8000);
  assert.ok(m);
  assert.equal(m.body, "via-annotation");
  assert.ok(Date.now() >= at.getTime() - 200, "not early");
  await receiver.completeMessage(m);
  await receiver.close();
  await sender.close();
});

test("cancelScheduledMessages removes scheduled messages", opts(), async () => {
  const sender = env.client.createSender("schedule-cancel");
  const receiver = env.client.createReceiver("schedule-cancel");
  const at = new Date(Date.now() + 60_000);
  const seqs = await sender.scheduleMessages(
    [{ body: "c1" }, { body: "c2" }, { body: "c3" }],
    at,
  );
  assert.equal(seqs.length, 3);
  assert.equal(new Set(seqs.map(String)).size, 3, "distinct sequence numbers");
  const peeked = await receiver.peekMessages(10, { fromSequenceNumber: seqs[0] });
  assert.deepEqual(peeked.map((m) => m.state), ["scheduled", "scheduled", "scheduled"]);

  await sender.cancelScheduledMessages(seqs[0]);
  let left = await receiver.peekMessages(10, { fromSequenceNumber: seqs[0] });
  assert.deepEqual(left.map((m) => m.body), ["c2", "c3"]);

  await sender.cancelScheduledMessages(seqs.slice(1));
  left = await receiver.peekMessages(10, { fromSequenceNumber: seqs[0] });
  assert.deepEqual(left, [], "all cancelled");
  await receiver.close();
  await sender.close();
});
