// Topics and subscriptions: fan-out, filters from Config.json, and the rule
// manager (add-rule / enumerate-rules / remove-rule on the subscription's
// $management node).

import { test } from "node:test";
import assert from "node:assert/strict";
import { opts, receiveN, receiveNone, useBroker } from "./lib.mjs";

const env = useBroker();

async function listAll(ruleManager) {
  const rules = [];
  for await (const r of ruleManager.listRules()) rules.push(r);
  return rules;
}

async function drain(receiver, max = 20) {
  const got = await receiveN(receiver, max, 2500);
  return got;
}

test("a topic fans out to subscriptions according to their rules", opts(), async () => {
  const sender = env.client.createSender("events");
  await sender.sendMessages([
    { body: "red-eu-order", correlationId: "order", applicationProperties: { color: "red", region: "eu" } },
    { body: "blue-eu-order", correlationId: "order", applicationProperties: { color: "blue", region: "eu" } },
    { body: "red-us", correlationId: "other", applicationProperties: { color: "red", region: "us" } },
    { body: "green-us-order", correlationId: "order", applicationProperties: { color: "green", region: "us" } },
  ]);

  const all = env.client.createReceiver("events", "all", { receiveMode: "receiveAndDelete" });
  assert.equal(all.entityPath, "events/Subscriptions/all");
  const gotAll = await receiveN(all, 4);
  assert.deepEqual(gotAll.map((m) => m.body), ["red-eu-order", "blue-eu-order", "red-us", "green-us-order"],
    "the $Default (1=1) subscription gets everything");

  const red = env.client.createReceiver("events", "red", { receiveMode: "receiveAndDelete" });
  const gotRed = await drain(red);
  assert.deepEqual(gotRed.map((m) => m.body), ["red-eu-order", "red-us"], "SQL filter color = 'red'");

  const orders = env.client.createReceiver("events", "orders", { receiveMode: "receiveAndDelete" });
  const gotOrders = await drain(orders);
  assert.deepEqual(gotOrders.map((m) => m.body), ["red-eu-order", "blue-eu-order"],
    "correlation filter correlationId='order' AND region='eu'");

  for (const r of [all, red, orders]) await r.close();
  // Drain the other subscriptions so later tests start clean.
  for (const sub of ["managed", "duplicate-rules"]) {
    const r = env.client.createReceiver("events", sub, { receiveMode: "receiveAndDelete" });
    await drain(r);
    await r.close();
  }
  await sender.close();
});

test("rule manager: list, delete $Default, create SQL and correlation rules, filter, delete", opts(), async () => {
  const rm = env.client.createRuleManager("events", "managed");
  let rules = await listAll(rm);
  assert.deepEqual(rules.map((r) => r.name), ["$Default"], "a new subscription has only $Default");
  assert.equal(rules[0].filter.sqlExpression, "1=1", "$Default is a TrueFilter, shown as 1=1");

  await rm.deleteRule("$Default");
  await rm.createRule("priority", { sqlExpression: "priority > 5 AND sys.Label = 'alert'" });
  await rm.createRule("billing", {
    correlationId: "bill-1",
    subject: "invoice",
    contentType: "application/json",
    applicationProperties: { tenant: "acme", tier: 2 },
  });
  await rm.createRule("tagger", { sqlExpression: "kind = 'tag'" }, { sqlExpression: "SET tagged = 'yes'" });

  rules = await listAll(rm);
  const byName = Object.fromEntries(rules.map((r) => [r.name, r]));
  assert.deepEqual(Object.keys(byName).sort(), ["billing", "priority", "tagger"]);
  assert.equal(byName.priority.filter.sqlExpression, "priority > 5 AND sys.Label = 'alert'");
  const corr = byName.billing.filter;
  assert.equal(corr.correlationId, "bill-1");
  assert.equal(corr.subject, "invoice");
  assert.equal(corr.contentType, "application/json");
  assert.deepEqual(corr.applicationProperties, { tenant: "acme", tier: 2 });
  assert.equal(byName.tagger.action.sqlExpression, "SET tagged = 'yes'");
  assert.equal(byName.priority.action.sqlExpression, undefined, "no action: EmptyRuleAction");

  // Paging: listRules().byPage honours maxPageSize (skip/top on enumerate-rules).
  const pages = [];
  for await (const page of rm.listRules().byPage({ maxPageSize: 2 })) pages.push(page.map((r) => r.name));
  assert.deepEqual(pages.map((p) => p.length), [2, 1]);
  assert.deepEqual(pages.flat().sort(), ["billing", "priority", "tagger"]);

  const sender = env.client.createSender("events");
  await sender.sendMessages([
    { body: "alert-9", subject: "alert", applicationProperties: { priority: 9 } },
    { body: "alert-1", subject: "alert", applicationProperties: { priority: 1 } },
    { body: "note-9", subject: "note", applicationProperties: { priority: 9 } },
    {
      body: "invoice",
      correlationId: "bill-1",
      subject: "invoice",
      contentType: "application/json",
      applicationProperties: { tenant: "acme", tier: 2 },
    },
    { body: "invoice-other-tenant", correlationId: "bill-1", subject: "invoice", contentType: "application/json",
      applicationProperties: { tenant: "zeta", tier: 2 } },
    { body: "tag-me", applicationProperties: { kind: "tag" } },
  ]);
  const rcv = env.client.createReceiver("events", "managed", { receiveMode: "receiveAndDelete" });
  const got = await drain(rcv);
  assert.deepEqual(got.map((m) => m.body).sort(), ["alert-9", "invoice", "tag-me"]);
  const tagged = got.find((m) => m.body === "tag-me");
  assert.equal(tagged.applicationProperties.tagged, "yes", "the SqlRuleAction ran on the copy");
  assert.equal(got.filter((m) => m.body === "tag-me").length, 1);

  await rm.deleteRule("priority");
  rules = await listAll(rm);
  assert.deepEqual(rules.map((r) => r.name).sort(), ["billing", "tagger"]);
  await sender.sendMessages({ body: "alert-after-delete", subject: "alert", applicationProperties: { priority: 9 } });
  assert.deepEqual(await receiveNone(rcv), [], "deleted rule no longer matches");

  await rcv.close();
  await sender.close();
});

test("rule manager errors: duplicate name and unknown rule", opts(), async () => {
  const rm = env.client.createRuleManager("events", "duplicate-rules");
  await rm.createRule("dup", { sqlExpression: "a = 1" });
  await assert.rejects(rm.createRule("dup", { sqlExpression: "a = 2" }), (err) => {
    assert.equal(err.code, "MessagingEntityAlreadyExists", `${err.code}: ${err.message}`);
    return true;
  });
  await assert.rejects(rm.deleteRule("no-such-rule"), "deleting a missing rule fails (code: see the next test)");
  await assert.rejects(rm.createRule("broken", { sqlExpression: "a = = 1" }), "an unparsable SQL filter is refused");
  const names = (await listAll(rm)).map((r) => r.name).sort();
  assert.deepEqual(names, ["$Default", "dup"]);
});

test("deleting a missing rule fails with MessagingEntityNotFound", opts(), async () => {
  const rm = env.client.createRuleManager("events", "duplicate-rules");
  await assert.rejects(rm.deleteRule("no-such-rule"), (err) => {
    assert.equal(err.code, "MessagingEntityNotFound", `${err.code}: ${err.message}`);
    return true;
  });
});

test("peekLock on a subscription, abandon and dead-letter there", opts(), async () => {
  const sender = env.client.createSender("events");
  await sender.sendMessages({ body: "sub-settle", messageId: "ss-1", applicationProperties: { color: "red" } });
  const red = env.client.createReceiver("events", "red");
  const [m] = await receiveN(red, 1);
  assert.ok(m);
  await red.abandonMessage(m);
  const [again] = await receiveN(red, 1);
  assert.ok(again);
  assert.equal(again.deliveryCount, 1);
  await red.deadLetterMessage(again, { deadLetterReason: "sub-reason", deadLetterErrorDescription: "sub-desc" });
  const dlq = env.client.createReceiver("events", "red", { subQueueType: "deadLetter" });
  assert.equal(dlq.entityPath, "events/Subscriptions/red/$DeadLetterQueue");
  const [d] = await receiveN(dlq, 1);
  assert.ok(d, "dead-lettered subscription message");
  assert.equal(d.messageId, "ss-1");
  assert.equal(d.deadLetterReason, "sub-reason");
  await dlq.completeMessage(d);

  // The message also went to the other subscriptions; empty them.
  for (const sub of ["all", "managed", "duplicate-rules"]) {
    const r = env.client.createReceiver("events", sub, { receiveMode: "receiveAndDelete" });
    await drain(r, 5);
    await r.close();
  }
  await dlq.close();
  await red.close();
  await sender.close();
});
