// Sessions: acceptSession / acceptNextSession, FIFO per session, session
// state, session lock renewal and the session error codes.

import { test } from "node:test";
import assert from "node:assert/strict";
import { newClient, opts, receiveN, receiveNone, sleep, useBroker, withTimeout } from "./lib.mjs";

const env = useBroker();

test("acceptSession receives only its session, in FIFO order", opts(), async () => {
  const sender = env.client.createSender("sessions");
  const msgs = [];
  for (let i = 0; i < 5; i++) {
    msgs.push({ body: `a${i}`, sessionId: "s-a" }, { body: `b${i}`, sessionId: "s-b" });
  }
  await sender.sendMessages(msgs);

  const a = await env.client.acceptSession("sessions", "s-a");
  assert.equal(a.sessionId, "s-a", "the attach echoes the session filter as a plain string");
  assert.ok(a.sessionLockedUntilUtc instanceof Date, "locked-until-utc read from the attach");
  assert.ok(a.sessionLockedUntilUtc > new Date(), `session lock ${a.sessionLockedUntilUtc} in the future`);

  const peeked = await a.peekMessages(10);
  assert.deepEqual(peeked.map((m) => m.body), ["a0", "a1", "a2", "a3", "a4"], "session peek sees only its session");

  const gotA = await receiveN(a, 5);
  assert.deepEqual(gotA.map((m) => m.body), ["a0", "a1", "a2", "a3", "a4"]);
  for (const m of gotA) {
    assert.equal(m.sessionId, "s-a");
    await a.completeMessage(m);
  }
  assert.deepEqual(await receiveNone(a), []);
  await a.close();

  const b = await env.client.acceptSession("sessions", "s-b", { receiveMode: "receiveAndDelete" });
  const gotB = await receiveN(b, 5);
  assert.deepEqual(gotB.map((m) => m.body), ["b0", "b1", "b2", "b3", "b4"]);
  assert.ok(gotB.every((m) => m.sessionId === "s-b"));
  await b.close();
  await sender.close();
});

test("acceptNextSession picks sessions that have messages and skips locked ones", opts(), async () => {
  const sender = env.client.createSender("sessions-next");
  await sender.sendMessages([
    { body: "x1", sessionId: "n-1" },
    { body: "y1", sessionId: "n-2" },
  ]);
  const first = await env.client.acceptNextSession("sessions-next");
  assert.ok(["n-1", "n-2"].includes(first.sessionId), `got session ${first.sessionId}`);
  const second = await env.client.acceptNextSession("sessions-next");
  assert.ok(["n-1", "n-2"].includes(second.sessionId), `got session ${second.sessionId}`);
  assert.notEqual(second.sessionId, first.sessionId, "a locked session is not handed out twice");

  for (const r of [first, second]) {
    const [m] = await receiveN(r, 1);
    assert.ok(m, `a message in session ${r.sessionId}`);
    assert.equal(m.sessionId, r.sessionId);
    assert.equal(m.body, r.sessionId === "n-1" ? "x1" : "y1");
    await r.completeMessage(m);
    await r.close();
  }
  await sender.close();
});

test("acceptNextSession on a queue without sessions times out", opts(), async () => {
  const quick = newClient(env, { retryOptions: { maxRetries: 0, timeoutInMs: 3000 } });
  const start = Date.now();
  await assert.rejects(withTimeout(quick.acceptNextSession("sessions-empty"), 15_000, "acceptNextSession"), (err) => {
    assert.ok(
      ["ServiceTimeout", "SessionCannotBeLocked"].includes(err.code),
      `expected ServiceTimeout (com.microsoft:timeout detach), got ${err.code}: ${err.message}`,
    );
    return true;
  });
  assert.ok(Date.now() - start < 12_000, "the broker honours com.microsoft:timeout");
});

test("acceptSession on a session locked elsewhere fails with SessionCannotBeLocked", opts(), async () => {
  const sender = env.client.createSender("sessions-locked");
  await sender.sendMessages({ body: "l", sessionId: "busy" });
  const holder = await env.client.acceptSession("sessions-locked", "busy");
  const other = newClient(env, { retryOptions: { maxRetries: 0, timeoutInMs: 5000 } });
  await assert.rejects(other.acceptSession("sessions-locked", "busy"), (err) => {
    assert.equal(err.code, "SessionCannotBeLocked", `${err.code}: ${err.message}`);
    return true;
  });
  await holder.close();
  // Closing the link releases the lock.
  const again = await other.acceptSession("sessions-locked", "busy");
  const [m] = await receiveN(again, 1);
  assert.ok(m, "the message is still there for the next owner");
  assert.equal(m.body, "l");
  await again.completeMessage(m);
  await again.close();
  await sender.close();
});

test("getSessionState / setSessionState", opts(), async () => {
  const sender = env.client.createSender("sessions-state");
  await sender.sendMessages({ body: "st", sessionId: "state-1" });
  const r = await env.client.acceptSession("sessions-state", "state-1");
  const initial = await r.getSessionState();
  assert.ok(initial === null || initial === undefined, `a new session has no state, got ${initial}`);

  await r.setSessionState({ step: 2, items: ["a"] });
  assert.deepEqual(await r.getSessionState(), { step: 2, items: ["a"] });
  await r.setSessionState(Buffer.from([1, 2, 3]));
  const buf = await r.getSessionState();
  assert.ok(Buffer.isBuffer(buf), "binary state comes back as binary");
  assert.deepEqual([...buf], [1, 2, 3]);
  await r.setSessionState("checkpoint-9");
  await r.close();

  const r2 = await env.client.acceptSession("sessions-state", "state-1");
  assert.equal(await r2.getSessionState(), "checkpoint-9", "state outlives the receiver");
  const [m] = await receiveN(r2, 1);
  assert.ok(m);
  await r2.completeMessage(m);
  await r2.close();
  await sender.close();
});

test("renewSessionLock extends the session lock", opts(), async () => {
  const sender = env.client.createSender("sessions-state");
  await sender.sendMessages({ body: "renew", sessionId: "renew-1" });
  const r = await env.client.acceptSession("sessions-state", "renew-1", { maxAutoLockRenewalDurationInMs: 0 });
  const original = r.sessionLockedUntilUtc;
  const [m] = await receiveN(r, 1);
  assert.ok(m);
  await sleep(1200);
  const renewed = await r.renewSessionLock();
  assert.ok(renewed instanceof Date);
  assert.ok(renewed > original, `renewed ${renewed.toISOString()} > original ${original.toISOString()}`);
  assert.equal(r.sessionLockedUntilUtc.getTime(), renewed.getTime());

  // Outlive the original PT5S lock; settlement must still work.
  await sleep(Math.max(0, original.getTime() - Date.now()) + 800);
  await r.completeMessage(m);
  await r.close();
  await sender.close();
});

test("an expired session lock fails settlement with SessionLockLost", opts(), async () => {
  const sender = env.client.createSender("sessions-state");
  await sender.sendMessages({ body: "expire", sessionId: "expire-1" });
  const r = await env.client.acceptSession("sessions-state", "expire-1", { maxAutoLockRenewalDurationInMs: 0 });
  const [m] = await receiveN(r, 1);
  assert.ok(m);
  await sleep(Math.max(0, r.sessionLockedUntilUtc.getTime() - Date.now()) + 1000);

  // The lock lapsed while r's link is still attached: another client may take the session.
  const other = newClient(env, { retryOptions: { maxRetries: 0, timeoutInMs: 5000 } });
  const again = await other.acceptSession("sessions-state", "expire-1");
  await assert.rejects(r.completeMessage(m), (err) => {
    assert.equal(err.code, "SessionLockLost", `${err.code}: ${err.message}`);
    return true;
  });
  await r.close().catch(() => {});

  const [m2] = await receiveN(again, 1);
  assert.ok(m2, "the message is available to the next session owner");
  assert.equal(m2.body, "expire");
  assert.equal(m2.deliveryCount, 1, "the lapsed lock counted as a delivery attempt");
  await again.completeMessage(m2);
  await again.close();
  await sender.close();
});

test("defer inside a session and receiveDeferredMessages on the session receiver", opts(), async () => {
  const sender = env.client.createSender("sessions");
  await sender.sendMessages([
    { body: "d1", sessionId: "defer-s" },
    { body: "d2", sessionId: "defer-s" },
  ]);
  const r = await env.client.acceptSession("sessions", "defer-s");
  const [m1, m2] = await receiveN(r, 2);
  assert.ok(m1 && m2);
  await r.deferMessage(m1);
  await r.completeMessage(m2);
  const [d] = await r.receiveDeferredMessages(m1.sequenceNumber);
  assert.ok(d, "deferred session message returned");
  assert.equal(d.body, "d1");
  assert.equal(d.sessionId, "defer-s");
  await r.completeMessage(d);
  assert.deepEqual(await receiveNone(r), []);
  await r.close();
  await sender.close();
});

test("sending without sessionId to a session queue is rejected", opts(), async () => {
  const sender = env.client.createSender("sessions");
  await assert.rejects(sender.sendMessages({ body: "no-session" }));
  await sender.close();
});

test("sessions on a topic subscription", opts(), async () => {
  const sender = env.client.createSender("session-topic");
  await sender.sendMessages([
    { body: "t1", sessionId: "topic-s" },
    { body: "other", sessionId: "topic-other" },
    { body: "t2", sessionId: "topic-s" },
  ]);
  const r = await env.client.acceptSession("session-topic", "by-session", "topic-s");
  assert.equal(r.sessionId, "topic-s");
  assert.equal(r.entityPath, "session-topic/Subscriptions/by-session");
  const got = await receiveN(r, 2);
  assert.deepEqual(got.map((m) => m.body), ["t1", "t2"]);
  for (const m of got) await r.completeMessage(m);
  await r.setSessionState("sub-state");
  assert.equal(await r.getSessionState(), "sub-state");
  await r.close();

  const next = await env.client.acceptNextSession("session-topic", "by-session", { receiveMode: "receiveAndDelete" });
  assert.equal(next.sessionId, "topic-other");
  const [o] = await receiveN(next, 1);
  assert.equal(o?.body, "other");
  await next.close();
  await sender.close();
});
