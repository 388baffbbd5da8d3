// Partitioned entities (EnablePartitioning): created with the admin client,
// used with the plain senders and receivers. Order holds per partition key
// and per session, sequence numbers carry the partition in their top 16
// bits, partitionKey comes back on every message, and Service Bus's bad
// partition keys are refused without losing anything.
//
// With OMNIBUS_JSTEST_CLUSTER=3 (make jstest-cluster) the broker is a
// cluster of three nodes with three data groups: the senders connect to
// node 2, the receivers to node 3 and the admin client to node 1, and a
// partitioned entity's partitions lie in every group, so each message
// crosses nodes and groups between its sender and its receiver.

import { before, test } from "node:test";
import assert from "node:assert/strict";
import { httpGatewayUp } from "./harness.mjs";
import { adminClient, opts, receiveN, receiveNone, useBroker } from "./lib.mjs";

const env = useBroker();
let admin;

before(async () => {
  await env.ready;
  if (!(await httpGatewayUp(env.broker))) {
    throw new Error(`the HTTP gateway does not answer GET /health on port ${env.broker.httpPort}`);
  }
  admin = adminClient(env);
  await admin.createQueue("part-q", { enablePartitioning: true });
  await admin.createQueue("part-sq", { enablePartitioning: true, requiresSession: true });
  await admin.createQueue("part-bad", { enablePartitioning: true });
  await admin.createTopic("part-t", { enablePartitioning: true });
  await admin.createSubscription("part-t", "all");
});

const partitionOf = (m) => BigInt(m.sequenceNumber.toString()) >> 48n;

test("the admin client sees enablePartitioning", opts(), async () => {
  const q = await admin.getQueue("part-q");
  assert.equal(q.enablePartitioning, true);
  const t = await admin.getTopic("part-t");
  assert.equal(t.enablePartitioning, true);
});

test("order per partition key, and partitionKey comes back", opts(), async () => {
  const sender = env.senderClient.createSender("part-q");
  const keys = ["red", "green", "blue", "cyan", "plum", "gold"];
  const msgs = [];
  for (let i = 0; i < 4; i++) {
    for (const k of keys) msgs.push({ body: `${k}-${i}`, partitionKey: k });
  }
  for (const m of msgs) await sender.sendMessages(m);
  const receiver = env.client.createReceiver("part-q");
  const got = await receiveN(receiver, msgs.length);
  assert.equal(got.length, msgs.length, "every message received");
  const next = {};
  const part = {};
  for (const m of got) {
    const [k, n] = m.body.split("-");
    assert.equal(m.partitionKey, k, `partitionKey of ${m.body}`);
    assert.equal(Number(n), next[k] ?? 0, `key ${k}: ${m.body} out of order`);
    next[k] = Number(n) + 1;
    const p = partitionOf(m);
    if (part[k] !== undefined) assert.equal(p, part[k], `key ${k} stays in one partition`);
    part[k] = p;
    await receiver.completeMessage(m);
  }
  assert.ok(new Set(Object.values(part)).size > 1, "six keys use more than one partition");
  assert.deepEqual(await receiveNone(receiver), []);
  await receiver.close();
  await sender.close();
});

test("a batch with one partition key, deferral across partitions", opts(), async () => {
  const sender = env.senderClient.createSender("part-q");
  const batch = await sender.createMessageBatch();
  for (let i = 0; i < 5; i++) assert.ok(batch.tryAddMessage({ body: `b${i}`, partitionKey: "batch" }));
  await sender.sendMessages(batch);
  // An array is sent as one batch, which goes to one partition: Service
  // Bus refuses one of distinct partition keys, storing nothing.
  await assert.rejects(
    sender.sendMessages([{ body: "x", partitionKey: "other-1" }, { body: "y", partitionKey: "other-2" }]),
    (err) => /InvalidOperationError/.test(`${err.code} ${err.message}`) && /distinct SessionId or PartitionKey/.test(err.message),
  );
  await sender.sendMessages({ body: "x", partitionKey: "other-1" });
  await sender.sendMessages({ body: "y", partitionKey: "other-2" });
  const receiver = env.client.createReceiver("part-q");
  const got = await receiveN(receiver, 7);
  assert.equal(got.length, 7);
  const batched = got.filter((m) => m.partitionKey === "batch").map((m) => m.body);
  assert.deepEqual(batched, ["b0", "b1", "b2", "b3", "b4"], "a batch keeps its order");
  const seqs = [];
  for (const m of got) {
    await receiver.deferMessage(m);
    seqs.push(m.sequenceNumber);
  }
  const deferred = await receiver.receiveDeferredMessages(seqs);
  assert.equal(deferred.length, 7, "deferred messages of every partition come back by sequence number");
  for (const m of deferred) await receiver.completeMessage(m);
  await receiver.close();
  await sender.close();
});

test("peek pages through every partition once", opts(), async () => {
  const sender = env.senderClient.createSender("part-q");
  const msgs = [];
  for (let i = 0; i < 12; i++) msgs.push({ body: `p${i}`, partitionKey: `k${i}` });
  for (const m of msgs) await sender.sendMessages(m);
  const receiver = env.client.createReceiver("part-q");
  const seen = [];
  for (let i = 0; i < 20; i++) {
    const page = await receiver.peekMessages(5);
    if (page.length === 0) break;
    seen.push(...page.map((m) => m.body));
  }
  assert.deepEqual([...seen].sort(), msgs.map((m) => m.body).sort());
  const drained = await receiveN(env.client.createReceiver("part-q", { receiveMode: "receiveAndDelete" }), 12);
  assert.equal(drained.length, 12);
  await receiver.close();
  await sender.close();
});

test("sessions of a partitioned queue: acceptNextSession, FIFO and state", opts(), async () => {
  const sender = env.senderClient.createSender("part-sq");
  const ids = ["s1", "s2", "s3", "s4"];
  for (let i = 0; i < 3; i++) {
    for (const id of ids) await sender.sendMessages({ body: `${id}.${i}`, sessionId: id });
  }
  // A batch of distinct sessions is refused, as one of distinct partition keys.
  await assert.rejects(
    sender.sendMessages(ids.map((id) => ({ body: `${id}.x`, sessionId: id }))),
    (err) => /InvalidOperationError/.test(`${err.code} ${err.message}`) && /distinct SessionId or PartitionKey/.test(err.message),
  );
  const seen = new Set();
  for (let n = 0; n < ids.length; n++) {
    const r = await env.client.acceptNextSession("part-sq");
    assert.ok(!seen.has(r.sessionId), `session ${r.sessionId} accepted twice`);
    seen.add(r.sessionId);
    const got = await receiveN(r, 3);
    assert.deepEqual(got.map((m) => m.body), [0, 1, 2].map((i) => `${r.sessionId}.${i}`));
    for (const m of got) await r.completeMessage(m);
    await r.setSessionState(`state-${r.sessionId}`);
    assert.equal(String(await r.getSessionState()), `state-${r.sessionId}`);
    await r.close();
  }
  assert.deepEqual([...seen].sort(), ids);
  await sender.close();
});

test("a partitioned topic's subscription gets every message", opts(), async () => {
  const sender = env.senderClient.createSender("part-t");
  const msgs = [];
  for (let i = 0; i < 8; i++) msgs.push({ body: `t${i}`, partitionKey: `k${i}` });
  for (const m of msgs) await sender.sendMessages(m);
  const r = env.client.createReceiver("part-t", "all", { receiveMode: "receiveAndDelete" });
  const got = await receiveN(r, 8);
  assert.deepEqual(got.map((m) => m.body).sort(), msgs.map((m) => m.body).sort());
  await r.close();
  await sender.close();
});

test("a partition key over 128 characters, or one that is not the session id, is refused", opts(), async () => {
  const sender = env.senderClient.createSender("part-bad");
  // The SDK checks both itself before sending; what reaches the broker is
  // checked there too (TestSDKPartitionKeyBadInput sends them past the Go
  // SDK, which does not).
  await assert.rejects(sender.sendMessages({ body: "long", partitionKey: "k".repeat(129) }));
  await assert.rejects(sender.sendMessages({ body: "differ", sessionId: "a", partitionKey: "b" }));
  await sender.sendMessages({ body: "fine", partitionKey: "k".repeat(128) });
  const r = env.client.createReceiver("part-bad", { receiveMode: "receiveAndDelete" });
  const got = await receiveN(r, 1);
  assert.deepEqual(got.map((m) => m.body), ["fine"], "only the good message was stored");
  assert.deepEqual(await receiveNone(r), []);
  await r.close();
  await sender.close();
});
