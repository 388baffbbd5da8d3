// Queues: send, receive in both modes, complete, streaming subscribe, batches.

import { test } from "node:test";
import assert from "node:assert/strict";
import { ServiceBusClient } from "@azure/service-bus";
import { KEY } from "./harness.mjs";
import { opts, receiveN, receiveNone, receiveNonePastLock, useBroker } from "./lib.mjs";

const env = useBroker();

test("send, receive in peekLock, complete", opts(), async () => {
  const sender = env.client.createSender("complete-5s");
  const receiver = env.client.createReceiver("complete-5s", { maxAutoLockRenewalDurationInMs: 0 });
  await sender.sendMessages({ body: "hello", messageId: "m-1" });

  const [msg] = await receiveN(receiver, 1);
  assert.ok(msg, "no message received");
  assert.equal(msg.body, "hello");
  assert.equal(msg.messageId, "m-1");
  assert.equal(msg.deliveryCount, 0, "first delivery");
  assert.match(msg.lockToken, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
  assert.ok(msg.lockedUntilUtc instanceof Date && msg.lockedUntilUtc > new Date(), "lockedUntilUtc in the future");
  assert.ok(msg.sequenceNumber.toNumber() >= 1, "sequence number set");
  assert.ok(Math.abs(msg.enqueuedTimeUtc - Date.now()) < 60_000, "enqueuedTimeUtc near now");
  assert.equal(msg.state, "active");
  await receiver.completeMessage(msg);

  // Past the 5 s lock: a complete the broker ignored would come back then.
  assert.deepEqual(await receiveNonePastLock(receiver, msg.lockedUntilUtc), [], "completed message must not come back");
  await receiver.close();
  await sender.close();
});

test("a message sent without messageId gets one, so default auto lock renewal can settle it", opts(), async () => {
  // The JS SDK keys its auto lock renewer by messageId and throws "Failed to
  // stop auto lock renewal - no message ID" on settle when it is missing;
  // Service Bus assigns one (a GUID) to messages sent without.
  const sender = env.client.createSender("basic");
  const receiver = env.client.createReceiver("basic"); // default maxAutoLockRenewalDurationInMs: 5 min
  await sender.sendMessages({ body: "anonymous" });
  const [msg] = await receiveN(receiver, 1);
  assert.ok(msg);
  assert.equal(typeof msg.messageId, "string", "the broker assigned a message-id");
  assert.ok(msg.messageId.length > 0);
  await receiver.completeMessage(msg);
  assert.deepEqual(await receiveNone(receiver), []);
  await receiver.close();
  await sender.close();
});

test("the first delivery carries delivery-count 0 explicitly", opts(), async () => {
  // JS reads header.delivery-count as is (no +1, unlike Go) and rhea leaves
  // an elided field undefined: Service Bus writes 0 on a first delivery.
  const sender = env.client.createSender("basic");
  const receiver = env.client.createReceiver("basic", { receiveMode: "receiveAndDelete" });
  await sender.sendMessages({ body: "count", messageId: "count-1" });
  const [msg] = await receiveN(receiver, 1);
  assert.ok(msg);
  assert.equal(msg.deliveryCount, 0);
  await receiver.close();
  await sender.close();
});

test("receiveMessages in receiveAndDelete removes the messages", opts(), async () => {
  const sender = env.client.createSender("receive-delete");
  const receiver = env.client.createReceiver("receive-delete", { receiveMode: "receiveAndDelete" });
  await sender.sendMessages([{ body: "a" }, { body: "b" }, { body: "c" }]);

  const got = await receiveN(receiver, 3);
  assert.deepEqual(got.map((m) => m.body), ["a", "b", "c"]);
  assert.deepEqual(await receiveNone(receiver), []);

  const peeker = env.client.createReceiver("receive-delete");
  assert.deepEqual(await peeker.peekMessages(10), [], "nothing left to peek");
  await peeker.close();
  await receiver.close();
  await sender.close();
});

test("receiveMessages returns up to maxMessageCount in peekLock", opts(), async () => {
  const sender = env.client.createSender("basic");
  const receiver = env.client.createReceiver("basic");
  await sender.sendMessages(Array.from({ length: 8 }, (_, i) => ({ body: `n${i}`, messageId: `n-${i}` })));

  const first = await receiver.receiveMessages(5, { maxWaitTimeInMs: 5000 });
  assert.ok(first.length >= 1 && first.length <= 5, `got ${first.length} of at most 5`);
  const rest = await receiveN(receiver, 8 - first.length);
  const all = [...first, ...rest];
  assert.deepEqual(
    all.map((m) => m.body),
    Array.from({ length: 8 }, (_, i) => `n${i}`),
    "FIFO order across calls",
  );
  for (const m of all) await receiver.completeMessage(m);
  assert.deepEqual(await receiveNone(receiver), []);
  await receiver.close();
  await sender.close();
});

test("subscribe() streams many messages to the handler", opts(), async () => {
  const total = 60;
  const sender = env.client.createSender("streaming");
  const batch = await sender.createMessageBatch();
  for (let i = 0; i < total; i++) assert.ok(batch.tryAddMessage({ body: { i }, messageId: `stream-${i}` }));
  await sender.sendMessages(batch);

  const receiver = env.client.createReceiver("streaming");
  const seen = new Set();
  const errors = [];
  let resolveAll;
  const allSeen = new Promise((r) => (resolveAll = r));
  const sub = receiver.subscribe(
    {
      processMessage: async (m) => {
        seen.add(m.body.i);
        if (seen.size === total) resolveAll();
      },
      processError: async (args) => {
        errors.push(args.error);
      },
    },
    { maxConcurrentCalls: 8, autoCompleteMessages: true },
  );
  await Promise.race([allSeen, new Promise((r) => setTimeout(r, 20_000))]);
  await sub.close();
  assert.deepEqual(errors, [], "processError must not be called");
  assert.equal(seen.size, total, `handler saw ${seen.size} of ${total} messages`);

  // autoCompleteMessages settled everything.
  const check = env.client.createReceiver("streaming", { receiveMode: "receiveAndDelete" });
  assert.deepEqual(await receiveNone(check), []);
  await check.close();
  await receiver.close();
  await sender.close();
});

test("createMessageBatch packs messages into one transfer and they arrive separately", opts(), async () => {
  const sender = env.client.createSender("batch");
  const batch = await sender.createMessageBatch();
  assert.ok(batch.maxSizeInBytes > 0, "maxSizeInBytes comes from the attach's max-message-size");
  for (let i = 0; i < 25; i++) {
    assert.ok(
      batch.tryAddMessage({ body: `b${i}`, messageId: `id-${i}`, applicationProperties: { i } }),
      `message ${i} fits`,
    );
  }
  assert.equal(batch.count, 25);
  await sender.sendMessages(batch);

  const receiver = env.client.createReceiver("batch", { receiveMode: "receiveAndDelete" });
  const got = await receiveN(receiver, 25);
  assert.equal(got.length, 25);
  got.forEach((m, i) => {
    assert.equal(m.body, `b${i}`);
    assert.equal(m.messageId, `id-${i}`);
    assert.equal(m.applicationProperties.i, i);
  });
  const seqs = got.map((m) => m.sequenceNumber.toNumber());
  assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b), "each message gets its own increasing sequence number");
  assert.equal(new Set(seqs).size, 25);
  await receiver.close();
  await sender.close();
});

test("a batch refuses a message larger than maxSizeInBytes", opts(), async () => {
  const sender = env.client.createSender("batch");
  const batch = await sender.createMessageBatch({ maxSizeInBytes: 1024 });
  assert.equal(batch.tryAddMessage({ body: Buffer.alloc(2048) }), false);
  assert.equal(batch.tryAddMessage({ body: "small" }), true);
  await sender.close();
});

test("sendMessages with an array sends every message", opts(), async () => {
  const sender = env.client.createSender("batch");
  await sender.sendMessages(Array.from({ length: 10 }, (_, i) => ({ body: i })));
  const receiver = env.client.createReceiver("batch", { receiveMode: "receiveAndDelete" });
  const got = await receiveN(receiver, 10);
  assert.deepEqual(got.map((m) => m.body), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  await receiver.close();
  await sender.close();
});

test("sending to a queue that does not exist fails with MessagingEntityNotFound", opts(), async () => {
  const sender = env.client.createSender("no-such-queue");
  await assert.rejects(sender.sendMessages({ body: "x" }), (err) => {
    assert.equal(err.code, "MessagingEntityNotFound", `${err.code}: ${err.message}`);
    return true;
  });
  await sender.close();
});

test("a receiver on a queue that does not exist fails with MessagingEntityNotFound", opts(), async () => {
  const receiver = env.client.createReceiver("no-such-queue");
  await assert.rejects(receiver.receiveMessages(1, { maxWaitTimeInMs: 2000 }), (err) => {
    assert.equal(err.code, "MessagingEntityNotFound", `${err.code}: ${err.message}`);
    return true;
  });
  await receiver.close();
});

test("a wrong SAS key fails with UnauthorizedAccess", opts(), async () => {
  const bad = new ServiceBusClient(env.broker.connectionString.replace(`SharedAccessKey=${KEY}`, "SharedAccessKey=wrong"), {
    retryOptions: { maxRetries: 0, timeoutInMs: 5000 },
  });
  try {
    await assert.rejects(bad.createSender("basic").sendMessages({ body: "x" }), (err) => {
      assert.equal(err.code, "UnauthorizedAccess", `${err.code}: ${err.message}`);
      return true;
    });
  } finally {
    await bad.close();
  }
});

test("receiveMessages on an empty queue returns by maxWaitTimeInMs and the link keeps working", opts(), async () => {
  // At the end of every receiveMessages the SDK drains the link and waits
  // at most max(200 ms, time left) for the broker's flow(drain=true,
  // link-credit=0); without it the SDK closes the link.
  const receiver = env.client.createReceiver("basic");
  for (let i = 0; i < 3; i++) {
    const start = Date.now();
    const got = await receiver.receiveMessages(5, { maxWaitTimeInMs: 500 });
    const took = Date.now() - start;
    assert.deepEqual(got, []);
    assert.ok(took < 2000, `empty receive ${i} took ${took} ms for a 500 ms wait`);
  }
  const sender = env.client.createSender("basic");
  await sender.sendMessages({ body: "after-drain", messageId: "after-drain" });
  const [m] = await receiveN(receiver, 1);
  assert.ok(m, "the drained link still delivers");
  assert.equal(m.body, "after-drain");
  await receiver.completeMessage(m);
  await receiver.close();
  await sender.close();
});

test("getMessageIterator yields messages as they arrive", opts(), async () => {
  const sender = env.client.createSender("streaming");
  await sender.sendMessages([0, 1, 2, 3].map((i) => ({ body: i, messageId: `it-${i}` })));
  const receiver = env.client.createReceiver("streaming");
  const seen = [];
  for await (const m of receiver.getMessageIterator()) {
    seen.push(m.body);
    await receiver.completeMessage(m);
    if (seen.length === 4) break;
  }
  assert.deepEqual(seen, [0, 1, 2, 3]);
  await receiver.close();
  await sender.close();
});

test("500 messages through batches and receiveAndDelete", opts(), async () => {
  const total = 500;
  const sender = env.client.createSender("receive-delete");
  let batch = await sender.createMessageBatch();
  for (let i = 0; i < total; i++) {
    const m = { body: i, messageId: `bulk-${i}` };
    if (!batch.tryAddMessage(m)) {
      await sender.sendMessages(batch);
      batch = await sender.createMessageBatch();
      assert.ok(batch.tryAddMessage(m));
    }
  }
  await sender.sendMessages(batch);
  const receiver = env.client.createReceiver("receive-delete", { receiveMode: "receiveAndDelete" });
  const got = [];
  const deadline = Date.now() + 20_000;
  while (got.length < total && Date.now() < deadline) {
    got.push(...(await receiver.receiveMessages(100, { maxWaitTimeInMs: 2000 })));
  }
  assert.equal(got.length, total);
  assert.deepEqual(got.map((m) => m.body), Array.from({ length: total }, (_, i) => i), "FIFO across batches");
  await receiver.close();
  await sender.close();
});
