// ServiceBusAdministrationClient (ATOM over the HTTP gateway) together with
// the AMQP front: entities created over HTTP are usable over AMQP at once,
// and runtime counts reflect AMQP traffic.

import { before, test } from "node:test";
import assert from "node:assert/strict";
import { httpGatewayUp } from "./harness.mjs";
import { adminClient, opts, receiveN, useBroker } from "./lib.mjs";

const env = useBroker();
let admin;

before(async () => {
  await env.ready;
  if (!(await httpGatewayUp(env.broker))) {
    throw new Error(`the HTTP gateway does not answer GET /health on port ${env.broker.httpPort}`);
  }
  admin = adminClient(env);
});

async function collect(iter) {
  const out = [];
  for await (const x of iter) out.push(x);
  return out;
}

test("getNamespaceProperties", opts(), async () => {
  const ns = await admin.getNamespaceProperties();
  assert.equal(typeof ns.name, "string");
  assert.ok(ns.name.length > 0);
  assert.ok(ns.createdAt instanceof Date);
});

test("createQueue / getQueue / updateQueue / deleteQueue", opts(), async () => {
  const created = await admin.createQueue("admin-q", {
    lockDuration: "PT30S",
    maxDeliveryCount: 7,
    defaultMessageTimeToLive: "PT10M",
    deadLetteringOnMessageExpiration: true,
    userMetadata: "made by jstest",
  });
  assert.equal(created.name, "admin-q");
  assert.equal(created.lockDuration, "PT30S");
  assert.equal(created.maxDeliveryCount, 7);
  assert.equal(created.requiresSession, false);

  const got = await admin.getQueue("admin-q");
  assert.equal(got.name, "admin-q", "name taken from <id>'s URL path");
  assert.equal(got.lockDuration, "PT30S");
  assert.equal(got.maxDeliveryCount, 7);
  assert.equal(got.defaultMessageTimeToLive, "PT10M");
  assert.equal(got.deadLetteringOnMessageExpiration, true);
  assert.equal(got.userMetadata, "made by jstest");
  assert.equal(got.status, "Active");
  assert.equal(await admin.queueExists("admin-q"), true);

  got.maxDeliveryCount = 3;
  got.lockDuration = "PT45S";
  const updated = await admin.updateQueue(got);
  assert.equal(updated.maxDeliveryCount, 3);
  const again = await admin.getQueue("admin-q");
  assert.equal(again.maxDeliveryCount, 3);
  assert.equal(again.lockDuration, "PT45S");

  await assert.rejects(admin.createQueue("admin-q"), (err) => {
    assert.equal(err.code, "MessageEntityAlreadyExistsError", `${err.code}: ${err.message}`);
    assert.equal(err.statusCode, 409);
    return true;
  });

  await admin.deleteQueue("admin-q");
  assert.equal(await admin.queueExists("admin-q"), false);
  await assert.rejects(admin.getQueue("admin-q"), (err) => {
    // 404, or real Service Bus's 200 with an empty feed: the SDK maps both.
    assert.equal(err.code, "MessageEntityNotFoundError", `${err.code}: ${err.message}`);
    return true;
  });
});

test("a queue created over HTTP works over AMQP; getQueueRuntimeProperties counts", opts(), async () => {
  await admin.createQueue("admin-runtime", { lockDuration: "PT5S" });
  const sender = env.client.createSender("admin-runtime");
  await sender.sendMessages([1, 2, 3].map((i) => ({ body: i, messageId: `rt-${i}` })));
  await sender.scheduleMessages({ body: "later" }, new Date(Date.now() + 600_000));

  const receiver = env.client.createReceiver("admin-runtime");
  const [m] = await receiveN(receiver, 1);
  assert.ok(m, "message sent over AMQP to an HTTP-created queue");
  await receiver.deadLetterMessage(m, { deadLetterReason: "r" });

  const rt = await admin.getQueueRuntimeProperties("admin-runtime");
  assert.equal(rt.name, "admin-runtime");
  assert.equal(rt.activeMessageCount, 2);
  assert.equal(rt.deadLetterMessageCount, 1);
  assert.equal(rt.scheduledMessageCount, 1);
  assert.equal(rt.totalMessageCount, 4);
  assert.ok(rt.sizeInBytes > 0, "sizeInBytes counts stored messages");
  assert.ok(rt.createdAt instanceof Date);

  const names = (await collect(admin.listQueues())).map((q) => q.name);
  assert.ok(names.includes("admin-runtime") && names.includes("basic"), `listQueues: ${names}`);
  const rts = await collect(admin.listQueuesRuntimeProperties());
  assert.equal(rts.find((q) => q.name === "admin-runtime")?.activeMessageCount, 2);

  await receiver.close();
  await sender.close();
  await admin.deleteQueue("admin-runtime");
});

test("listQueues pages with maxPageSize", opts(), async () => {
  const pages = [];
  for await (const page of admin.listQueues().byPage({ maxPageSize: 5 })) pages.push(page.map((q) => q.name));
  const all = pages.flat();
  assert.ok(pages.length >= 2, `Config.json has more than 5 queues, got ${pages.length} page(s)`);
  assert.ok(pages.every((p) => p.length <= 5));
  assert.equal(new Set(all).size, all.length, "no queue listed twice");
  assert.ok(all.includes("sessions") && all.includes("lockrenew"));
});

test("topics, subscriptions and rules over HTTP, used over AMQP", opts(), async () => {
  await admin.createTopic("admin-topic");
  assert.equal((await admin.getTopic("admin-topic")).name, "admin-topic");
  await admin.createSubscription("admin-topic", "cheap", {
    defaultRuleOptions: { name: "cheap-only", filter: { sqlExpression: "price < 10" } },
  });
  await admin.createSubscription("admin-topic", "tagged", { lockDuration: "PT20S" });
  const sub = await admin.getSubscription("admin-topic", "tagged");
  assert.equal(sub.subscriptionName, "tagged");
  assert.equal(sub.topicName, "admin-topic");
  assert.equal(sub.lockDuration, "PT20S");

  await admin.deleteRule("admin-topic", "tagged", "$Default");
  await admin.createRule("admin-topic", "tagged", "corr", { correlationId: "c-1", applicationProperties: { k: "v" } },
    { sqlExpression: "SET seen = 1" });
  const rule = await admin.getRule("admin-topic", "tagged", "corr");
  assert.equal(rule.name, "corr");
  assert.equal(rule.filter.correlationId, "c-1");
  assert.deepEqual(rule.filter.applicationProperties, { k: "v" });
  assert.equal(rule.action.sqlExpression, "SET seen = 1");
  const cheapRules = await collect(admin.listRules("admin-topic", "cheap"));
  assert.deepEqual(cheapRules.map((r) => r.name), ["cheap-only"]);
  assert.equal(cheapRules[0].filter.sqlExpression, "price < 10");

  const sender = env.client.createSender("admin-topic");
  await sender.sendMessages([
    { body: "cheap", applicationProperties: { price: 5 } },
    { body: "dear", applicationProperties: { price: 50 } },
    { body: "corr", correlationId: "c-1", applicationProperties: { k: "v", price: 99 } },
  ]);
  const cheap = env.client.createReceiver("admin-topic", "cheap", { receiveMode: "receiveAndDelete" });
  const gotCheap = await receiveN(cheap, 1);
  assert.deepEqual(gotCheap.map((m) => m.body), ["cheap"]);
  const tagged = env.client.createReceiver("admin-topic", "tagged", { receiveMode: "receiveAndDelete" });
  const [t] = await receiveN(tagged, 1);
  assert.ok(t);
  assert.equal(t.body, "corr");
  assert.equal(t.applicationProperties.seen, 1);

  const srt = await admin.getSubscriptionRuntimeProperties("admin-topic", "cheap");
  assert.equal(srt.activeMessageCount, 0);
  const trt = await admin.getTopicRuntimeProperties("admin-topic");
  assert.equal(trt.subscriptionCount, 2);

  await cheap.close();
  await tagged.close();
  await sender.close();
  await admin.deleteSubscription("admin-topic", "cheap");
  assert.equal(await admin.subscriptionExists("admin-topic", "cheap"), false);
  await admin.deleteTopic("admin-topic");
  assert.equal(await admin.topicExists("admin-topic"), false);
});

test("rule SQL with quotes reads back unchanged", opts(), async () => {
  await admin.createTopic("admin-quotes");
  await admin.createSubscription("admin-quotes", "q");
  const sql = `color = 'red' AND name <> "x"`;
  await admin.createRule("admin-quotes", "q", "quoted", { sqlExpression: sql }, { sqlExpression: "SET seen = 'yes'" });
  try {
    const rule = await admin.getRule("admin-quotes", "q", "quoted");
    assert.equal(rule.filter.sqlExpression, sql);
    assert.equal(rule.action.sqlExpression, "SET seen = 'yes'");
  } finally {
    await admin.deleteTopic("admin-quotes");
  }
});

test("a session queue created over HTTP accepts sessions over AMQP", opts(), async () => {
  const q = await admin.createQueue("admin-sessions", { requiresSession: true });
  assert.equal(q.requiresSession, true);
  const sender = env.client.createSender("admin-sessions");
  await sender.sendMessages({ body: "s", sessionId: "adm" });
  const r = await env.client.acceptSession("admin-sessions", "adm", { receiveMode: "receiveAndDelete" });
  const [m] = await receiveN(r, 1);
  assert.ok(m);
  assert.equal(m.sessionId, "adm");
  await r.close();
  await sender.close();
  await admin.deleteQueue("admin-sessions");
});
