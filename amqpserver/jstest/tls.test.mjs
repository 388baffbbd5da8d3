// The JavaScript SDK with an ordinary connection string (no
// UseDevelopmentEmulator): AMQP over TLS, and AMQP over WebSockets (which
// in Node is always wss://) through the `ws` package, trusting omnibus's
// local CA the two ways cmd/omnibus/README.md gives: NODE_EXTRA_CA_CERTS for the
// process, or the CA handed to the WebSocket.

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import WebSocket from "ws";
import { ServiceBusClient } from "@azure/service-bus";
import { useBroker, opts, RETRY, receiveN } from "./lib.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const env = useBroker({ tls: true });

/** Runs tls-client.mjs in a node of its own with extra environment variables. */
function runClient(args, extraEnv) {
  const childEnv = { ...process.env, ...extraEnv };
  if (!("NODE_EXTRA_CA_CERTS" in extraEnv)) delete childEnv.NODE_EXTRA_CA_CERTS;
  return new Promise((resolve) => {
    execFile(process.execPath, [path.join(here, "tls-client.mjs"), ...args], { env: childEnv, timeout: 60_000 },
      (err, stdout, stderr) => resolve({ code: err ? (err.code ?? 1) : 0, stdout, stderr }));
  });
}

test("AMQPS: NODE_EXTRA_CA_CERTS and the ordinary connection string", opts(), async () => {
  await env.ready;
  const b = env.broker;
  const r = await runClient(["amqps", b.tlsConnectionString(), "tls-amqps"], { NODE_EXTRA_CA_CERTS: b.caPath });
  assert.equal(r.code, 0, `client failed:\n${r.stderr}\n${b.tail()}`);
  assert.match(r.stdout, /round trip: ok/);
});

test("AMQPS without trusting the CA fails on the certificate", opts(), async () => {
  await env.ready;
  const b = env.broker;
  const r = await runClient(["amqps", b.tlsConnectionString(), "tls-untrusted"], {});
  assert.notEqual(r.code, 0, "a client that does not trust the local CA connected");
  assert.match(r.stderr, /certificate|self[- ]signed|issuer/i);
});

test("WebSockets (wss://, AMQPWSB10): NODE_EXTRA_CA_CERTS and the HTTPS port", opts(), async () => {
  await env.ready;
  const b = env.broker;
  const r = await runClient(["websocket", b.tlsConnectionString(b.httpsPort), "tls-ws"], { NODE_EXTRA_CA_CERTS: b.caPath });
  assert.equal(r.code, 0, `client failed:\n${r.stderr}\n${b.tail()}`);
  assert.match(r.stdout, /round trip: ok/);
});

test("WebSockets with the CA in webSocketConstructorOptions", opts(), async () => {
  await env.ready;
  const b = env.broker;
  const client = new ServiceBusClient(b.tlsConnectionString(b.httpsPort), {
    retryOptions: RETRY,
    webSocketOptions: { webSocket: WebSocket, webSocketConstructorOptions: { ca: fs.readFileSync(b.caPath) } },
  });
  env.clients.push(client);
  const sender = client.createSender("tls-ws-ca");
  await sender.sendMessages([{ body: "one" }, { body: "two" }]);
  const receiver = client.createReceiver("tls-ws-ca");
  const got = await receiveN(receiver, 2);
  assert.deepEqual(got.map((m) => m.body).sort(), ["one", "two"]);
  for (const m of got) await receiver.completeMessage(m);
  await receiver.close();
  await sender.close();
});
