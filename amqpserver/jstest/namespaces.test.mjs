// Two namespaces of one omnibus at once, through the official JS SDK,
// each with its own shared access rules (core/namespace): the client
// reaches a namespace by host name (customEndpointAddress dials the
// listener while the AMQP open names north.localhost, which need not
// resolve) or by key name ("rule@namespace"); each rule does only what
// its rights allow, a queue's own rule reaches only its queue, and a key
// of one namespace reaches nothing of the other.

import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { ServiceBusClient } from "@azure/service-bus";
import { CONFIG, startOmnibus } from "./harness.mjs";
import { RETRY, opts, receiveN, rejectsWithCode, withTimeout } from "./lib.mjs";

// 44-character keys, as Service Bus makes them.
const NORTH_SEND = "bm9ydGgtc2VuZC1ub3J0aC1zZW5kLW5vcnRoLXNlbmQ=";
const NORTH_LISTEN = "bm9ydGgtbGlzdGVuLW5vcnRoLWxpc3Rlbi1ub3J0aC0=";
const SOUTH_MANAGE = "c291dGgtbWFuYWdlLXNvdXRoLW1hbmFnZS1zb3V0aC0=";
const SOUTH_READER = "c291dGgtcmVhZGVyLXNvdXRoLXJlYWRlci1zb3V0aC0=";

const config = structuredClone(CONFIG);
config.UserConfig.Namespaces.push(
  {
    Name: "north",
    AuthorizationRules: [
      { KeyName: "sender", PrimaryKey: NORTH_SEND, Rights: ["Send"] },
      { KeyName: "reader", PrimaryKey: NORTH_LISTEN, Rights: ["Listen"] },
    ],
    Queues: [{ Name: "orders", Properties: {} }],
  },
  {
    Name: "south",
    AuthorizationRules: [{ KeyName: "admin", PrimaryKey: SOUTH_MANAGE, Rights: ["Manage", "Send", "Listen"] }],
    Queues: [
      {
        Name: "orders",
        Properties: { AuthorizationRules: [{ KeyName: "orders-reader", PrimaryKey: SOUTH_READER, Rights: ["Listen"] }] },
      },
      { Name: "other", Properties: {} },
    ],
  },
);

let broker;
const clients = [];

// No retries: the JS SDK retries a refused $management request (it marks
// a 401 status retryable) and then rejects with an AggregateError of the
// attempts; a single attempt rejects with the refusal itself.
const NO_RETRY = { ...RETRY, maxRetries: 0 };

before(async () => {
  broker = await startOmnibus({ config });
});

after(async () => {
  for (const c of clients) await withTimeout(c.close(), 5000, "closing a client").catch(() => {});
  if (broker) await broker.stop();
  setTimeout(() => process.exit(), 3000).unref();
});

/** A client of namespace ns by host name, through customEndpointAddress. */
function byHost(ns, keyName, key) {
  const cs =
    `Endpoint=sb://${ns}.localhost:${broker.amqpPort};SharedAccessKeyName=${keyName};` +
    `SharedAccessKey=${key};UseDevelopmentEmulator=true`;
  const c = new ServiceBusClient(cs, {
    retryOptions: NO_RETRY,
    customEndpointAddress: `amqp://127.0.0.1:${broker.amqpPort}`,
  });
  clients.push(c);
  return c;
}

/** A client on 127.0.0.1 whose key name picks the namespace. */
function byKeyName(keyName, key) {
  const cs =
    `Endpoint=sb://127.0.0.1:${broker.amqpPort};SharedAccessKeyName=${keyName};` +
    `SharedAccessKey=${key};UseDevelopmentEmulator=true`;
  const c = new ServiceBusClient(cs, { retryOptions: NO_RETRY });
  clients.push(c);
  return c;
}

async function send(client, queue, body) {
  const s = client.createSender(queue);
  try {
    await s.sendMessages({ body });
  } finally {
    await s.close();
  }
}

async function peek(client, queue) {
  const r = client.createReceiver(queue);
  try {
    return await r.peekMessages(10);
  } finally {
    await r.close();
  }
}

test("two namespaces at once keep their messages apart", opts(), async () => {
  const northSender = byHost("north", "sender", NORTH_SEND);
  const southAdmin = byKeyName("admin@south", SOUTH_MANAGE);
  await Promise.all([send(northSender, "orders", "to north"), send(southAdmin, "orders", "to south")]);

  const northReader = byKeyName("reader@north", NORTH_LISTEN).createReceiver("orders", { receiveMode: "receiveAndDelete" });
  const southReader = byHost("south", "admin", SOUTH_MANAGE).createReceiver("orders", { receiveMode: "receiveAndDelete" });
  const [north, south] = await Promise.all([receiveN(northReader, 1), receiveN(southReader, 1)]);
  assert.deepEqual(north.map((m) => m.body), ["to north"]);
  assert.deepEqual(south.map((m) => m.body), ["to south"]);
  await northReader.close();
  await southReader.close();

  // The default namespace (the harness's config) never saw either.
  const def = new ServiceBusClient(broker.connectionString, { retryOptions: RETRY });
  clients.push(def);
  const r = def.createReceiver("basic");
  assert.equal((await r.peekMessages(10)).length, 0);
  await r.close();
});

test("each rule does only what its rights allow", opts(), async () => {
  // Send only.
  const sender = byHost("north", "sender", NORTH_SEND);
  await send(sender, "orders", "rights");
  await rejectsWithCode(assert, peek(sender, "orders"), "UnauthorizedAccess");
  // Listen only.
  const reader = byHost("north", "reader", NORTH_LISTEN);
  await rejectsWithCode(assert, send(reader, "orders", "not allowed"), "UnauthorizedAccess");
  const r = reader.createReceiver("orders", { receiveMode: "receiveAndDelete" });
  assert.deepEqual((await receiveN(r, 1)).map((m) => m.body), ["rights"]);
  await r.close();
});

test("a queue's own rule reaches that queue only", opts(), async () => {
  await send(byKeyName("admin@south", SOUTH_MANAGE), "other", "other's");
  const queueReader = byHost("south", "orders-reader", SOUTH_READER);
  assert.equal((await peek(queueReader, "orders")).length, 0);
  await rejectsWithCode(assert, peek(queueReader, "other"), "UnauthorizedAccess");
  await rejectsWithCode(assert, send(queueReader, "orders", "not allowed"), "UnauthorizedAccess");
});

test("a key of one namespace reaches nothing of the other", opts(), async () => {
  // north's key name and key on a connection to south (by host).
  await rejectsWithCode(assert, send(byHost("south", "sender", NORTH_SEND), "orders", "x"), "UnauthorizedAccess");
  // north's key under its alias, on south's host: the names disagree.
  await rejectsWithCode(assert, send(byHost("south", "sender@north", NORTH_SEND), "orders", "x"), "UnauthorizedAccess");
  // The root key: north and south have rules of their own.
  await rejectsWithCode(assert, send(byHost("north", "RootManageSharedAccessKey", "SAS_KEY_VALUE"), "orders", "x"), "UnauthorizedAccess");
  // Nothing arrived in south.
  assert.equal((await peek(byKeyName("admin@south", SOUTH_MANAGE), "orders")).length, 0);
});
