// The official JavaScript SDK in a real browser: @azure/service-bus 7.9.5,
// bundled by esbuild (build.mjs), in Debian's headless Chromium, against
// the omnibus binary over AMQP on WebSockets (wss://localhost:<https
// port>/$servicebus/websocket). The page is served from another origin
// (another port, plain HTTP) than the broker's, as an application's page
// would be: the SDK opens the WebSocket itself, so no CORS is involved,
// and omnibus lets the page in because its origin is listed in
// --allowed-origins (with the publicly known key no page may otherwise).
// The test drives the page and checks what it shows.

import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { ServiceBusClient } from "@azure/service-bus";
import { KEY, KEY_NAME, startOmnibus } from "../jstest/harness.mjs";
import { buildPage } from "./build.mjs";
import { homeTrusting, launchChromium, serveStatic } from "./browser.mjs";

const TEST_TIMEOUT_MS = 120_000;

function queue(name) {
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
    },
  };
}

const CONFIG = {
  UserConfig: {
    Namespaces: [{ Name: "sbemulatorns", Queues: [queue("browser"), queue("untrusted"), queue("uninvited")], Topics: [] }],
    Logging: { Type: "Console" },
  },
};

// site serves the page from the origin omnibus is told to admit;
// stranger serves the same page from another origin, not listed.
let broker, site, stranger, node, dir;
const cleanups = [];

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "omnibus-browser-"));
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  const page = path.join(dir, "page");
  // The static servers read files per request, so they may start before
  // the page is built; the broker needs the page's origin.
  site = await serveStatic(page);
  stranger = await serveStatic(page);
  [broker] = await Promise.all([
    startOmnibus({ config: CONFIG, tls: true, flags: ["--allowed-origins", site.origin] }),
    buildPage(page),
  ]);
  // The Node SDK on plain AMQP, to put messages in and check what is left.
  node = new ServiceBusClient(broker.connectionString, { retryOptions: { maxRetries: 1, timeoutInMs: 10_000 } });
});

after(async () => {
  await node?.close().catch(() => {});
  await site?.close();
  await stranger?.close();
  await broker?.stop();
  for (const f of cleanups.reverse()) f();
  setTimeout(() => process.exit(), 3000).unref(); // rhea may keep a socket to the stopped broker
});

/** Opens the page (from origin, site's by default) in a browser with the given home, waits for its verdict, returns what it shows. */
async function runPage(home, query, origin = site.origin) {
  const browser = await launchChromium(home);
  try {
    const page = await browser.newPage();
    const logs = [];
    const sockets = [];
    page.on("console", (m) => logs.push(`${m.type()}: ${m.text()}`));
    page.on("pageerror", (e) => logs.push(`pageerror: ${e.message}`));
    page.on("websocket", (ws) => sockets.push(ws.url()));
    await page.goto(`${origin}/?${new URLSearchParams(query)}`);
    await page.waitForFunction(() => ["done", "error"].includes(document.getElementById("status").textContent), null, {
      timeout: 90_000,
    });
    const shown = {};
    for (const id of ["status", "origin", "endpoint", "sent", "received", "completed", "error"]) {
      shown[id] = await page.textContent(`#${id}`);
    }
    shown.console = logs;
    shown.sockets = sockets;
    return shown;
  } finally {
    await browser.close();
  }
}

/** The bodies of every message stored in queue, from the start (this client has not peeked it before). */
async function peekBodies(queue) {
  const receiver = node.createReceiver(queue);
  const peeked = await receiver.peekMessages(50);
  await receiver.close();
  return peeked.map((m) => m.body);
}

/** The ordinary connection string for the HTTPS listener, which the browser reaches with wss://. */
function browserConnectionString() {
  return `Endpoint=sb://localhost:${broker.httpsPort}/;SharedAccessKeyName=${KEY_NAME};SharedAccessKey=${KEY}`;
}

test("Chromium sends, receives and completes through omnibus over WebSockets, from another origin", { timeout: TEST_TIMEOUT_MS }, async () => {
  // Two messages from Node over plain AMQP: the browser must receive them too.
  const sender = node.createSender("browser");
  await sender.sendMessages([{ body: "from-node-0" }, { body: "from-node-1" }]);
  await sender.close();

  const home = await homeTrusting(broker.caPath);
  cleanups.push(() => fs.rmSync(home, { recursive: true, force: true }));
  const shown = await runPage(home, { cs: browserConnectionString(), queue: "browser", n: "3", expect: "5" });
  const why = JSON.stringify(shown, null, 1);

  assert.equal(shown.status, "done", `the page did not finish: ${why}`);
  assert.equal(shown.error, "", why);
  assert.equal(shown.origin, site.origin);
  assert.notEqual(new URL(shown.origin).port, String(broker.httpsPort), "the page comes from another origin than the broker");
  assert.equal(shown.endpoint, `sb://localhost:${broker.httpsPort}/`);
  assert.deepEqual(shown.sockets, [`wss://localhost:${broker.httpsPort}/$servicebus/websocket`], "the SDK's one connection");
  assert.equal(shown.sent, "3");
  assert.deepEqual(
    JSON.parse(shown.received).sort(),
    ["from-browser-0", "from-browser-1", "from-browser-2", "from-node-0", "from-node-1"],
    why,
  );
  assert.equal(shown.completed, "5", why);

  // The completions were real: nothing is left, locked or not (a peek
  // sees locked messages too).
  assert.deepEqual(await peekBodies("browser"), [], "messages the page completed are still stored");
});

test("without omnibus's CA in its trust store Chromium refuses the connection", { timeout: TEST_TIMEOUT_MS }, async () => {
  const home = await homeTrusting(undefined);
  cleanups.push(() => fs.rmSync(home, { recursive: true, force: true }));
  const shown = await runPage(home, { cs: browserConnectionString(), queue: "untrusted", n: "1" });
  assert.equal(shown.status, "error", `the page connected without trusting the CA: ${JSON.stringify(shown)}`);
  assert.equal(shown.sent, "0");
  assert.ok(
    shown.console.some((line) => line.includes("ERR_CERT_AUTHORITY_INVALID")),
    `the connection failed for another reason than the certificate: ${JSON.stringify(shown)}`,
  );
  assert.deepEqual(await peekBodies("untrusted"), [], "nothing reached the queue");
});

test("a page whose origin is not in --allowed-origins gets no WebSocket", { timeout: TEST_TIMEOUT_MS }, async () => {
  const home = await homeTrusting(broker.caPath);
  cleanups.push(() => fs.rmSync(home, { recursive: true, force: true }));
  const shown = await runPage(home, { cs: browserConnectionString(), queue: "uninvited", n: "1" }, stranger.origin);
  assert.equal(shown.status, "error", `a page of an origin not listed connected: ${JSON.stringify(shown)}`);
  assert.equal(shown.origin, stranger.origin);
  assert.equal(shown.sent, "0");
  assert.ok(
    shown.console.some((line) => line.includes("403")),
    `the WebSocket failed for another reason than omnibus's 403: ${JSON.stringify(shown)}`,
  );
  assert.deepEqual(await peekBodies("uninvited"), [], "nothing reached the queue");
});
