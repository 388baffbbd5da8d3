// Helpers shared by the test files: a per-file broker and client, bounded
// receive loops, and timeouts so a broken broker fails a test instead of
// hanging the run.

import { after, before } from "node:test";
import { ServiceBusAdministrationClient, ServiceBusClient } from "@azure/service-bus";
import { startCluster, startOmnibus } from "./harness.mjs";

/** Per-test timeout: every test here finishes in a few seconds when the broker is right. */
export const TEST_TIMEOUT_MS = 30_000;

/**
 * Retry options for every client: the SDK's defaults (60 s operation
 * timeout, 3 retries) would turn each broker bug into minutes of waiting.
 */
export const RETRY = { maxRetries: 1, retryDelayInMs: 200, maxRetryDelayInMs: 500, timeoutInMs: 10_000 };

/**
 * The cluster a file's broker is, when OMNIBUS_JSTEST_CLUSTER is set
 * ("3": three nodes with three data groups, "5/3": five nodes, three
 * groups); undefined for a single broker.
 */
export function clusterFromEnv() {
  const v = process.env.OMNIBUS_JSTEST_CLUSTER;
  if (!v) return undefined;
  const [nodes, groups = nodes] = v.split("/").map(Number);
  if (!(nodes >= 1 && groups >= 1)) throw new Error(`OMNIBUS_JSTEST_CLUSTER=${v}: want NODES or NODES/GROUPS`);
  return { nodes, groups };
}

/**
 * Starts a broker before the file's tests and stops it afterwards (with
 * tls, also its AMQPS and HTTPS listeners: see startOmnibus). Returns
 * an object whose fields (broker, client, senderClient) are filled in by
 * the before hook; env.ready resolves once they are. With cluster
 * ({ nodes, groups }; by default clusterFromEnv()), the broker is a
 * cluster (startCluster): env.client is on its last node, env.senderClient
 * on its second and the admin client on its first, so what a test sends
 * and receives crosses nodes. Against one broker senderClient is client.
 */
export function useBroker({ tls = false, cluster = clusterFromEnv() } = {}) {
  const env = { broker: undefined, client: undefined, senderClient: undefined, clients: [], ready: undefined };
  // node 20 may run a file's top-level before hooks side by side: further
  // hooks that need the broker await env.ready.
  let resolveReady, rejectReady;
  env.ready = new Promise((res, rej) => ((resolveReady = res), (rejectReady = rej)));
  env.ready.catch(() => {});
  before(async () => {
    try {
      env.broker = cluster ? await startCluster(cluster) : await startOmnibus({ tls });
      env.client = newClient(env);
      env.senderClient = cluster ? newClient(env, {}, env.broker.senderConnectionString) : env.client;
      resolveReady(env);
    } catch (err) {
      rejectReady(err);
      throw err;
    }
  });
  after(async () => {
    for (const c of env.clients) {
      await withTimeout(c.close(), 5000, "closing a ServiceBusClient").catch(() => {});
    }
    if (env.broker) await env.broker.stop();
    // rhea keeps reconnecting to a broker that is gone; do not let a stuck
    // socket keep this file's process (and so the whole run) alive.
    setTimeout(() => process.exit(), 3000).unref();
  });
  return env;
}

/** A further ServiceBusClient on env's broker (or connectionString), closed after the file. */
export function newClient(env, options = {}, connectionString = env.broker.connectionString) {
  const c = new ServiceBusClient(connectionString, { retryOptions: RETRY, ...options });
  env.clients.push(c);
  return c;
}

/**
 * ServiceBusAdministrationClient for env's broker. The JS admin client
 * always builds https://<host:port>/ URLs (getUrl in
 * serviceBusAtomManagementClient.ts) and drops allowInsecureConnection
 * (Azure/azure-sdk-for-js#32757), so — like the Service Bus emulator's own
 * JS sample — this swaps the scheme to http before the request is signed
 * and lets the pipeline send plain HTTP to the gateway's port.
 */
export function adminClient(env) {
  const admin = new ServiceBusAdministrationClient(env.broker.adminConnectionString, {
    retryOptions: { maxRetries: 0 },
  });
  const getUrl = admin.getUrl.bind(admin);
  admin.getUrl = (p, q) => getUrl(p, q).replace(/^https:/, "http:");
  admin.pipeline.addPolicy({
    name: "omnibusPlainHttp",
    sendRequest(request, next) {
      request.allowInsecureConnection = true;
      return next(request);
    },
  });
  return admin;
}

/** Rejects with a clear message when p does not settle within ms. */
export function withTimeout(p, ms, what) {
  let timer;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
    }),
  ]);
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Receives until n messages arrived or timeoutMs passed; returns what came.
 */
export async function receiveN(receiver, n, timeoutMs = 10_000) {
  const got = [];
  const deadline = Date.now() + timeoutMs;
  while (got.length < n) {
    const left = deadline - Date.now();
    if (left <= 0) break;
    const batch = await receiver.receiveMessages(n - got.length, { maxWaitTimeInMs: Math.min(left, 5000) });
    got.push(...batch);
  }
  return got;
}

/** Receives for waitMs and asserts nothing arrives; returns what did. */
export async function receiveNone(receiver, waitMs = 1000) {
  return receiver.receiveMessages(10, { maxWaitTimeInMs: waitMs });
}

/**
 * Receives until marginMs after lockedUntil and returns what arrived. A
 * message whose settlement the broker ignored stays locked, and so out of
 * sight, until its lock lapses: only a wait past the lock shows it is gone.
 * Use it on a queue with a short lock (PT5S).
 */
export async function receiveNonePastLock(receiver, lockedUntil, marginMs = 1500) {
  const waitMs = Math.max(0, lockedUntil.getTime() - Date.now()) + marginMs;
  return receiver.receiveMessages(10, { maxWaitTimeInMs: waitMs });
}

/** Asserts that p rejects with a ServiceBusError (or RestError) of the given code. */
export async function rejectsWithCode(assert, p, code) {
  await assert.rejects(p, (err) => {
    assert.equal(err.code, code, `expected error code ${code}, got ${err.code}: ${err.message}`);
    return true;
  });
}

/**
 * Broker gaps these tests found, each the `todo` reason of the test that
 * documents the contract. Delete an entry (and its todo) once it passes.
 */
// GAPS lists known broker gaps, each a reason passed to opts() to mark a
// test as todo. Empty: every test must pass.
export const GAPS = {};

/** Test options: a timeout, plus `todo` when reason is given. */
export function opts(reason) {
  return reason ? { timeout: TEST_TIMEOUT_MS, todo: reason } : { timeout: TEST_TIMEOUT_MS };
}
