// Batch delete and purge with the official JS SDK's beta
// (@azure/service-bus 7.10.0-beta.2): deleteMessages and purgeMessages on
// queues, sessions, subscriptions and dead-letter subqueues.

import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { ServiceBusClient } from "@azure/service-bus";
import Long from "long";
import { startOmnibus } from "../jstest/harness.mjs";

const TEST_TIMEOUT_MS = 60_000;
const RETRY = { maxRetries: 1, retryDelayInMs: 200, maxRetryDelayInMs: 500, timeoutInMs: 10_000 };

function queue(name, props = {}) {
  return {
    Name: name,
    Properties: {
      DeadLetteringOnMessageExpiration: false,
      DefaultMessageTimeToLive: "PT1H",
      DuplicateDetectionHistoryTimeWindow: "PT20S",
      ForwardDeadLetteredMessagesTo: "",
      ForwardTo: "",
      LockDuration: "PT1M",
      MaxDeliveryCount: 10,
      RequiresDuplicateDetection: false,
      RequiresSession: false,
      ...props,
    },
  };
}

const CONFIG = {
  UserConfig: {
    Namespaces: [
      {
        Name: "sbemulatorns",
        Queues: [
          queue("delete"),
          queue("cutoff"),
          queue("purge"),
          queue("locked"),
          queue("deadletter"),
          queue("sessions", { RequiresSession: true }),
        ],
        Topics: [
          {
            Name: "events",
            Properties: { DefaultMessageTimeToLive: "PT1H", DuplicateDetectionHistoryTimeWindow: "PT20S", RequiresDuplicateDetection: false },
            Subscriptions: ["keep", "purged"].map((name) => ({
              Name: name,
              Properties: {
                DeadLetteringOnMessageExpiration: false,
                DefaultMessageTimeToLive: "PT1H",
                LockDuration: "PT1M",
                MaxDeliveryCount: 10,
                ForwardDeadLetteredMessagesTo: "",
                ForwardTo: "",
                RequiresSession: false,
              },
              Rules: [],
            })),
          },
        ],
      },
    ],
    Logging: { Type: "Console" },
  },
};

let broker;
let client;
before(async () => {
  broker = await startOmnibus({ config: CONFIG });
  client = new ServiceBusClient(broker.connectionString, { retryOptions: RETRY });
});
after(async () => {
  await client?.close().catch(() => {});
  await broker?.stop();
  // rhea may keep a socket to the stopped broker; do not let it hold the run.
  setTimeout(() => process.exit(), 3000).unref();
});

const opts = { timeout: TEST_TIMEOUT_MS };

async function send(entity, bodies, extra = {}) {
  const sender = client.createSender(entity);
  for (let i = 0; i < bodies.length; i += 200) {
    await sender.sendMessages(bodies.slice(i, i + 200).map((body) => ({ body, ...extra })));
  }
  await sender.close();
}

/**
 * Peeks everything left on a receiver's entity (bounded), from the start:
 * without fromSequenceNumber the SDK goes on after the last message it
 * peeked on that entity.
 */
async function peekAll(receiver) {
  const out = [];
  let from = Long.ZERO;
  for (let round = 0; round < 50; round++) {
    const batch = await receiver.peekMessages(250, { fromSequenceNumber: from });
    if (batch.length === 0) break;
    out.push(...batch);
    from = batch[batch.length - 1].sequenceNumber.add(1);
  }
  return out;
}

/** Waits, within a deadline, until the clock has passed t (a Date). */
async function waitPast(t) {
  const deadline = Date.now() + 5000;
  while (Date.now() <= t.getTime() + 1) {
    if (Date.now() > deadline) throw new Error("the clock did not move past " + t.toISOString());
    await new Promise((r) => setTimeout(r, 5));
  }
}

test("deleteMessages deletes the oldest messages, up to the count asked for", opts, async () => {
  await send("delete", ["a", "b", "c", "d", "e"]);
  const receiver = client.createReceiver("delete");
  assert.equal(await receiver.deleteMessages({ maxMessageCount: 3 }), 3);
  assert.deepEqual((await peekAll(receiver)).map((m) => m.body), ["d", "e"]);
  assert.equal(await receiver.deleteMessages({ maxMessageCount: 10 }), 2);
  assert.equal(await receiver.deleteMessages({ maxMessageCount: 10 }), 0, "an empty queue answers 0");
  await receiver.close();
});

test("deleteMessages with beforeEnqueueTime keeps messages enqueued after it", opts, async () => {
  await send("cutoff", ["old-1", "old-2"]);
  const cutoff = new Date();
  await waitPast(cutoff); // the next message lands in a later millisecond
  await send("cutoff", ["new"]);
  const receiver = client.createReceiver("cutoff");
  const deleted = await receiver.deleteMessages({ maxMessageCount: 100, beforeEnqueueTime: cutoff });
  assert.equal(deleted, 2, "both messages enqueued before the cutoff, and only they");
  assert.deepEqual((await peekAll(receiver)).map((m) => m.body), ["new"]);
  await receiver.close();
});

test("purgeMessages empties a queue across several 500-message batches", opts, async () => {
  const bodies = Array.from({ length: 1234 }, (_, i) => `m-${i}`);
  await send("purge", bodies);
  const receiver = client.createReceiver("purge");
  assert.equal(await receiver.purgeMessages(), 1234);
  assert.deepEqual(await peekAll(receiver), []);
  assert.equal(await receiver.purgeMessages(), 0);
  await receiver.close();
});

test("purgeMessages leaves locked messages to their receiver", opts, async () => {
  await send("locked", ["held-1", "held-2", "free-1", "free-2", "free-3"]);
  const receiver = client.createReceiver("locked");
  const held = await receiver.receiveMessages(2, { maxWaitTimeInMs: 5000 });
  assert.deepEqual(held.map((m) => m.body), ["held-1", "held-2"]);
  assert.equal(await receiver.purgeMessages(), 3, "only the unlocked messages are deleted");
  for (const m of held) await receiver.completeMessage(m); // the locks still hold
  assert.deepEqual(await peekAll(receiver), []);
  await receiver.close();
});

test("a session receiver deletes and purges its own session only", opts, async () => {
  await send("sessions", ["a-1", "a-2", "a-3"], { sessionId: "a" });
  await send("sessions", ["b-1"], { sessionId: "b" });
  const a = await client.acceptSession("sessions", "a");
  assert.equal(await a.deleteMessages({ maxMessageCount: 1 }), 1);
  assert.equal(await a.purgeMessages(), 2);
  await a.close();
  const b = await client.acceptSession("sessions", "b");
  const left = await b.receiveMessages(5, { maxWaitTimeInMs: 3000 });
  assert.deepEqual(left.map((m) => m.body), ["b-1"], "session b is untouched");
  await b.completeMessage(left[0]);
  await b.close();
});

test("purgeMessages on a dead-letter subqueue and on a subscription", opts, async () => {
  await send("deadletter", ["dead-1", "dead-2", "alive"]);
  const receiver = client.createReceiver("deadletter");
  for (const m of await receiver.receiveMessages(2, { maxWaitTimeInMs: 5000 })) {
    await receiver.deadLetterMessage(m, { deadLetterReason: "test" });
  }
  const dlq = client.createReceiver("deadletter", { subQueueType: "deadLetter" });
  assert.equal(await dlq.purgeMessages(), 2);
  assert.deepEqual(await peekAll(dlq), []);
  assert.deepEqual((await peekAll(receiver)).map((m) => m.body), ["alive"], "the queue itself keeps its message");
  await dlq.close();
  await receiver.close();

  await send("events", ["e-1", "e-2"]);
  const purged = client.createReceiver("events", "purged");
  assert.equal(await purged.purgeMessages(), 2);
  await purged.close();
  const keep = client.createReceiver("events", "keep");
  const got = await keep.receiveMessages(2, { maxWaitTimeInMs: 5000 });
  assert.deepEqual(got.map((m) => m.body).sort(), ["e-1", "e-2"], "the other subscription keeps its copies");
  for (const m of got) await keep.completeMessage(m);
  await keep.close();
});
