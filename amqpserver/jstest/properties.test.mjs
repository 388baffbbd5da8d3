// Message properties and bodies survive the broker unchanged.

import { test } from "node:test";
import assert from "node:assert/strict";
import { opts, receiveN, useBroker } from "./lib.mjs";

const env = useBroker();

test("system and application properties round trip", opts(), async () => {
  const sender = env.client.createSender("props");
  const receiver = env.client.createReceiver("props", { receiveMode: "receiveAndDelete" });
  const when = new Date("2024-05-06T07:08:09.123Z");
  const sent = {
    body: { order: 42, items: ["a", "b"] },
    messageId: "msg-props-1",
    correlationId: "corr-7",
    subject: "order.created",
    contentType: "application/json",
    to: "someone",
    replyTo: "reply-queue",
    replyToSessionId: "reply-session",
    timeToLive: 90_000,
    applicationProperties: {
      str: "text",
      int: 42,
      negative: -7,
      double: 3.25,
      big: 2 ** 40,
      yes: true,
      no: false,
      when,
      empty: "",
    },
  };
  const before = Date.now();
  await sender.sendMessages(sent);
  const [m] = await receiveN(receiver, 1);
  assert.ok(m, "no message received");

  assert.deepEqual(m.body, sent.body);
  for (const k of ["messageId", "correlationId", "subject", "contentType", "to", "replyTo", "replyToSessionId"]) {
    assert.equal(m[k], sent[k], k);
  }
  assert.equal(m.timeToLive, 90_000, "timeToLive as sent");
  assert.ok(m.expiresAtUtc instanceof Date, "expiresAtUtc derived from enqueued time + ttl");
  assert.ok(
    Math.abs(m.expiresAtUtc.getTime() - (m.enqueuedTimeUtc.getTime() + 90_000)) < 1000,
    `expiresAtUtc ${m.expiresAtUtc.toISOString()} = enqueued ${m.enqueuedTimeUtc.toISOString()} + 90 s`,
  );
  assert.ok(m.enqueuedTimeUtc.getTime() >= before - 5000, "enqueued time is the broker's send time");

  const p = m.applicationProperties;
  assert.equal(p.str, "text");
  assert.equal(p.int, 42);
  assert.equal(p.negative, -7);
  assert.equal(p.double, 3.25);
  assert.equal(p.big, 2 ** 40);
  assert.equal(p.yes, true);
  assert.equal(p.no, false);
  // The SDK turns timestamp application properties into epoch milliseconds.
  assert.equal(p.when, when.getTime(), "Date application property kept as AMQP timestamp");
  assert.equal(p.empty, "");

  // The raw AMQP view shows the wire types the broker preserved.
  const raw = m._rawAmqpMessage;
  assert.equal(raw.bodyType, "data", "a JSON body is sent as one data section");
  assert.equal(typeof raw.messageAnnotations["x-opt-sequence-number"], "number");
  assert.equal(typeof raw.messageAnnotations["x-opt-enqueued-time"], "number");
  await receiver.close();
  await sender.close();
});

test("timeToLive comes back exactly as sent", opts(), async () => {
  const sender = env.client.createSender("props");
  const receiver = env.client.createReceiver("props", { receiveMode: "receiveAndDelete" });
  await sender.sendMessages({ body: "ttl", messageId: "ttl-exact", timeToLive: 90_000 });
  const [m] = await receiveN(receiver, 1);
  assert.ok(m);
  assert.equal(m.timeToLive, 90_000, "header.ttl round trips");
  assert.equal(m.expiresAtUtc.getTime(), m.enqueuedTimeUtc.getTime() + 90_000);
  await receiver.close();
  await sender.close();
});

test("raw AMQP timestamp application property stays a Date with skipConvertingDate", opts(), async () => {
  const sender = env.client.createSender("props");
  const receiver = env.client.createReceiver("props", { receiveMode: "receiveAndDelete", skipConvertingDate: true });
  const when = new Date("2030-01-02T03:04:05.678Z");
  await sender.sendMessages({ body: "d", applicationProperties: { when } });
  const [m] = await receiveN(receiver, 1);
  assert.ok(m);
  assert.ok(m.applicationProperties.when instanceof Date, `got ${typeof m.applicationProperties.when}`);
  assert.equal(m.applicationProperties.when.getTime(), when.getTime());
  await receiver.close();
  await sender.close();
});

test("bodies: string, number, Buffer, array, null", opts(), async () => {
  const sender = env.client.createSender("bodies");
  const receiver = env.client.createReceiver("bodies", { receiveMode: "receiveAndDelete" });
  const bodies = ["plain text", 12345, Buffer.from([0, 1, 2, 250, 255]), [1, "two", { three: 3 }], null];
  await sender.sendMessages(bodies.map((body) => ({ body })));
  const got = await receiveN(receiver, bodies.length);
  assert.equal(got.length, bodies.length);
  assert.equal(got[0].body, "plain text");
  assert.equal(got[1].body, 12345);
  assert.ok(Buffer.isBuffer(got[2].body), "Buffer body comes back as a Buffer");
  assert.deepEqual([...got[2].body], [0, 1, 2, 250, 255]);
  assert.deepEqual(got[3].body, [1, "two", { three: 3 }]);
  assert.equal(got[4].body, null);
  await receiver.close();
  await sender.close();
});

test("AMQP value and sequence bodies are preserved verbatim", opts(), async () => {
  const sender = env.client.createSender("bodies");
  const receiver = env.client.createReceiver("bodies", { receiveMode: "receiveAndDelete" });
  await sender.sendMessages({ body: { nested: ["x", 1] }, bodyType: "value" });
  await sender.sendMessages({ body: [["a", 1], ["b", 2]], bodyType: "sequence" });
  const got = await receiveN(receiver, 2);
  assert.equal(got.length, 2);
  assert.equal(got[0]._rawAmqpMessage.bodyType, "value");
  assert.deepEqual(got[0].body, { nested: ["x", 1] });
  assert.equal(got[1]._rawAmqpMessage.bodyType, "sequence");
  assert.deepEqual(got[1].body, [["a", 1], ["b", 2]]);
  await receiver.close();
  await sender.close();
});

test("a large message (200 KB) round trips", opts(), async () => {
  const sender = env.client.createSender("bodies");
  const receiver = env.client.createReceiver("bodies", { receiveMode: "receiveAndDelete" });
  const big = Buffer.alloc(200 * 1024);
  for (let i = 0; i < big.length; i++) big[i] = i % 251;
  await sender.sendMessages({ body: big });
  const [m] = await receiveN(receiver, 1);
  assert.ok(m);
  assert.ok(Buffer.isBuffer(m.body));
  assert.equal(m.body.length, big.length);
  assert.ok(m.body.equals(big), "body bytes identical");
  await receiver.close();
  await sender.close();
});

test("message annotations set by the sender (partitionKey) come back", opts(), async () => {
  const sender = env.client.createSender("props");
  const receiver = env.client.createReceiver("props", { receiveMode: "receiveAndDelete" });
  await sender.sendMessages({ body: "pk", partitionKey: "pk-1" });
  const [m] = await receiveN(receiver, 1);
  assert.ok(m);
  assert.equal(m.partitionKey, "pk-1");
  await receiver.close();
  await sender.close();
});
