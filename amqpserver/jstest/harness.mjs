// Test harness: builds the omnibus binary once per `node --test` run,
// starts one broker per test file on free loopback ports with an in-memory
// store and the Config.json below, and stops it (by PID) when the file's
// tests end — also when they fail or the process dies.

import { spawn, execFile } from "node:child_process";
import { once } from "node:events";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const here = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.resolve(here, "..", "..");

/** Shared access key the broker is started with. */
export const KEY_NAME = "RootManageSharedAccessKey";
export const KEY = "SAS_KEY_VALUE";

/** How long the broker may take to say "omnibus is ready". */
const READY_TIMEOUT_MS = 30_000;
/** How long a cold `go build` may take on a 2-core machine. */
const BUILD_TIMEOUT_MS = 240_000;

// ---------------------------------------------------------------------------
// Config.json: every entity the test files use. Each file gets its own
// broker, and each test uses its own entities, so tests never share state.
// ---------------------------------------------------------------------------

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

function subscription(name, rules = [], props = {}) {
  return {
    Name: name,
    Properties: {
      DeadLetteringOnMessageExpiration: false,
      DefaultMessageTimeToLive: "PT1H",
      LockDuration: "PT1M",
      MaxDeliveryCount: 10,
      ForwardDeadLetteredMessagesTo: "",
      ForwardTo: "",
      RequiresSession: false,
      ...props,
    },
    Rules: rules,
  };
}

/** The emulator-format Config.json every broker starts with. */
export const CONFIG = {
  UserConfig: {
    Namespaces: [
      {
        Name: "sbemulatorns",
        Queues: [
          queue("basic"),
          // Settled messages that must not come back: a 5 s lock (Service
          // Bus's minimum) lets a test wait past it within its timeout.
          queue("complete-5s", { LockDuration: "PT5S" }),
          queue("mgmt-complete-5s", { LockDuration: "PT5S" }),
          queue("receive-delete"),
          queue("streaming"),
          queue("batch"),
          queue("props"),
          queue("bodies"),
          queue("abandon", { MaxDeliveryCount: 5 }),
          queue("maxdelivery", { MaxDeliveryCount: 2 }),
          queue("deadletter"),
          queue("expiry", { DeadLetteringOnMessageExpiration: true }),
          queue("defer"),
          queue("lockrenew", { LockDuration: "PT5S" }),
          queue("lockexpiry", { LockDuration: "PT5S" }),
          queue("peek"),
          queue("schedule"),
          queue("schedule-cancel"),
          queue("sessions", { RequiresSession: true }),
          queue("sessions-next", { RequiresSession: true }),
          queue("sessions-state", { RequiresSession: true, LockDuration: "PT5S" }),
          queue("sessions-empty", { RequiresSession: true }),
          queue("sessions-locked", { RequiresSession: true }),
          queue("tls-amqps"),
          queue("tls-untrusted"),
          queue("tls-ws"),
          queue("tls-ws-ca"),
        ],
        Topics: [
          {
            Name: "events",
            Properties: {
              DefaultMessageTimeToLive: "PT1H",
              DuplicateDetectionHistoryTimeWindow: "PT20S",
              RequiresDuplicateDetection: false,
            },
            Subscriptions: [
              subscription("all"),
              subscription("red", [
                {
                  Name: "red-only",
                  Properties: { FilterType: "Sql", SqlFilter: { SqlExpression: "color = 'red'" } },
                },
              ]),
              subscription("orders", [
                {
                  Name: "orders-corr",
                  Properties: {
                    FilterType: "Correlation",
                    CorrelationFilter: { CorrelationId: "order", Properties: { region: "eu" } },
                  },
                },
              ]),
              subscription("managed"),
              subscription("duplicate-rules"),
            ],
          },
          {
            Name: "session-topic",
            Properties: {
              DefaultMessageTimeToLive: "PT1H",
              DuplicateDetectionHistoryTimeWindow: "PT20S",
              RequiresDuplicateDetection: false,
            },
            Subscriptions: [subscription("by-session", [], { RequiresSession: true })],
          },
        ],
      },
    ],
    Logging: { Type: "Console" },
  },
};

// ---------------------------------------------------------------------------
// Building the binary once.
// ---------------------------------------------------------------------------

function pidAlive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === "EPERM";
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Builds ./cmd/omnibus and returns the binary's path. Under `node --test`
 * every test file runs in a child of the runner, so the build directory is
 * keyed by the runner's PID: the first file builds (holding a mkdir lock),
 * the others wait for it. Directories of runners that are gone are removed.
 * Run outside the runner, the file builds into a private directory.
 */
export async function buildOmnibus() {
  const base = path.join(os.tmpdir(), "omnibus-jstest");
  fs.mkdirSync(base, { recursive: true });
  for (const name of fs.readdirSync(base)) {
    const pid = Number(name);
    if (Number.isInteger(pid) && pid !== process.ppid && !pidAlive(pid)) {
      fs.rmSync(path.join(base, name), { recursive: true, force: true });
    }
  }
  const underRunner = Boolean(process.env.NODE_TEST_CONTEXT);
  const dir = underRunner ? path.join(base, String(process.ppid)) : fs.mkdtempSync(path.join(base, "solo-"));
  if (!underRunner) process.on("exit", () => fs.rmSync(dir, { recursive: true, force: true }));
  fs.mkdirSync(dir, { recursive: true });
  const bin = path.join(dir, "omnibus");
  const done = path.join(dir, "built");
  const failed = path.join(dir, "failed");

  let holder = false;
  try {
    fs.mkdirSync(path.join(dir, "lock"));
    holder = true;
  } catch (err) {
    if (err.code !== "EEXIST") throw err;
  }
  if (holder) {
    try {
      await promisify(execFile)("go", ["build", "-o", bin, "./cmd/omnibus"], {
        cwd: repoRoot,
        timeout: BUILD_TIMEOUT_MS,
        maxBuffer: 16 << 20,
      });
      fs.writeFileSync(done, "");
    } catch (err) {
      const msg = `go build ./cmd/omnibus failed: ${err.stderr || err.message}`;
      fs.writeFileSync(failed, msg);
      throw new Error(msg);
    }
    return bin;
  }
  const deadline = Date.now() + BUILD_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (fs.existsSync(done)) return bin;
    if (fs.existsSync(failed)) throw new Error(fs.readFileSync(failed, "utf8"));
    await sleep(100);
  }
  throw new Error(`timed out waiting for another test file to build ${bin}`);
}

// ---------------------------------------------------------------------------
// Starting and stopping a broker.
// ---------------------------------------------------------------------------

/**
 * A loopback port nothing listened on a moment ago, picked below the
 * kernel's ephemeral range, as cmd/internal/loopback does for the Go
 * tools: a port listen(0) hands out is as likely to be handed to the next
 * outgoing connection of any process running meanwhile (a cluster's nodes
 * dial each other's peer ports while the later ones start), which then
 * holds it when the broker binds it: "address already in use", seen in
 * CI on a peer port. Below the range only an explicit bind takes it.
 */
async function freePort() {
  const from = ephemeralPortsFrom();
  for (let i = 0; i < 100; i++) {
    const port = 10000 + Math.floor(Math.random() * (from - 10000));
    const srv = net.createServer();
    const ok = await new Promise((resolve) => {
      srv.once("error", () => resolve(false));
      srv.listen(port, "127.0.0.1", () => resolve(true));
    });
    if (!ok) continue;
    srv.close();
    await once(srv, "close");
    return port;
  }
  throw new Error("no free loopback port below the ephemeral range in 100 picks");
}

/** The first port of the kernel's ephemeral range (Linux's default 32768 when it cannot be read or leaves too little room below it). */
function ephemeralPortsFrom() {
  const linuxDefault = 32768;
  try {
    const lo = parseInt(fs.readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0], 10);
    return Number.isInteger(lo) && lo >= 12000 ? lo : linuxDefault;
  } catch {
    return linuxDefault;
  }
}

/** Every broker this process started (child → its temp dir), so an exit handler can kill them. */
const running = new Map();
process.on("exit", () => {
  for (const [child, dir] of running) {
    try {
      process.kill(child.pid, "SIGKILL");
    } catch {
      // already gone
    }
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
for (const sig of ["SIGINT", "SIGTERM"]) {
  process.once(sig, () => process.exit(130));
}

/**
 * A running broker: connection strings, ports, its output so far, and stop().
 */
export class Omnibus {
  constructor(child, amqpPort, httpPort, dir, tls) {
    this.child = child;
    this.pid = child.pid;
    this.amqpPort = amqpPort;
    this.httpPort = httpPort;
    this.dir = dir;
    this.output = "";
    this.exited = false;
    /** With startOmnibus({ tls: true }): the AMQPS and HTTPS ports and the CA to trust. */
    this.amqpsPort = tls?.amqpsPort;
    this.httpsPort = tls?.httpsPort;
    this.caPath = tls ? path.join(dir, "omnibus-ca.pem") : undefined;
  }

  /**
   * The ordinary connection string (no UseDevelopmentEmulator): the SDK
   * dials AMQPS on its port, or, with webSocketOptions, wss:// on it.
   */
  tlsConnectionString(port = this.amqpsPort) {
    return `Endpoint=sb://localhost:${port}/;SharedAccessKeyName=${KEY_NAME};SharedAccessKey=${KEY}`;
  }

  /** AMQP connection string in the emulator's form. */
  get connectionString() {
    return (
      `Endpoint=sb://127.0.0.1:${this.amqpPort};SharedAccessKeyName=${KEY_NAME};` +
      `SharedAccessKey=${KEY};UseDevelopmentEmulator=true`
    );
  }

  /**
   * Connection string for ServiceBusAdministrationClient: the admin client
   * takes host[:port] from Endpoint verbatim and always builds
   * https://host:port/ URLs, so this points at the HTTP gateway's port (see
   * adminClient() in lib.mjs for the scheme).
   */
  get adminConnectionString() {
    return (
      `Endpoint=sb://127.0.0.1:${this.httpPort};SharedAccessKeyName=${KEY_NAME};` +
      `SharedAccessKey=${KEY};UseDevelopmentEmulator=true`
    );
  }

  /** The last lines the broker logged, for failure messages. */
  tail(lines = 30) {
    return this.output.split("\n").slice(-lines).join("\n");
  }

  /** Stops the broker: SIGTERM, then SIGKILL after 5 s. */
  async stop() {
    if (!this.exited) {
      const exited = once(this.child, "exit");
      try {
        process.kill(this.pid, "SIGTERM");
      } catch {
        // already gone
      }
      const timer = setTimeout(() => {
        try {
          process.kill(this.pid, "SIGKILL");
        } catch {
          // already gone
        }
      }, 5000);
      await exited;
      clearTimeout(timer);
    }
    running.delete(this.child);
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * Builds (once) and starts omnibus with --memory and CONFIG (or config),
 * and flags besides the harness's own (e.g. ["--allowed-origins", origin]),
 * waits until it logs "omnibus is ready" and its AMQP port accepts
 * connections. Set OMNIBUS_JSTEST_LOG=1 to copy the broker's log to stderr.
 */
export async function startOmnibus({ config = CONFIG, tls = false, flags = [] } = {}) {
  const bin = await buildOmnibus();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "omnibus-jstest-run-"));
  const configPath = path.join(dir, "Config.json");
  fs.writeFileSync(configPath, JSON.stringify(config, null, 2));
  const amqpPort = await freePort();
  const httpPort = await freePort();
  const tlsPorts = tls ? { amqpsPort: await freePort(), httpsPort: await freePort() } : undefined;
  const args = [
    "--memory",
    "--data", dir,
    "--config", configPath,
    "--amqp-addr", `127.0.0.1:${amqpPort}`,
    "--http-addr", `127.0.0.1:${httpPort}`,
    "--key-name", KEY_NAME,
    "--key", KEY,
    // Not the default :5301: other brokers (a developer's, another test
    // run's) may hold it.
    "--metrics-addr", "127.0.0.1:0",
    // TLS listeners, with the local CA in the run's directory.
    ...(tls
      ? ["--amqps-addr", `127.0.0.1:${tlsPorts.amqpsPort}`, "--https-addr", `127.0.0.1:${tlsPorts.httpsPort}`, "--tls-dir", dir]
      : ["--https-addr", "-", "--amqps-addr", "-"]),
    ...flags,
  ];
  return launch(bin, args, dir, amqpPort, httpPort, tlsPorts);
}

/**
 * Runs bin with args in dir, and returns the Omnibus once it logged
 * "omnibus is ready" and its AMQP port accepts connections; stops it (and
 * removes dir) if it does not get there.
 */
async function launch(bin, args, dir, amqpPort, httpPort, tlsPorts) {
  const child = spawn(bin, args, { stdio: ["ignore", "pipe", "pipe"], cwd: dir });
  running.set(child, dir);
  const ob = new Omnibus(child, amqpPort, httpPort, dir, tlsPorts);
  const echo = process.env.OMNIBUS_JSTEST_LOG === "1";

  const ready = new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`omnibus did not become ready in ${READY_TIMEOUT_MS} ms:\n${ob.tail()}`)),
      READY_TIMEOUT_MS,
    );
    const onData = (chunk) => {
      const text = chunk.toString();
      ob.output += text;
      if (echo) process.stderr.write(text);
      if (ob.output.includes("omnibus is ready")) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.on("exit", (code, signal) => {
      ob.exited = true;
      running.delete(child);
      clearTimeout(timer);
      reject(new Error(`omnibus exited (code ${code}, signal ${signal}) before it was ready:\n${ob.tail()}`));
    });
    child.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
  try {
    await ready;
    await waitForPort(amqpPort, 5000, ob);
  } catch (err) {
    await ob.stop();
    throw err;
  }
  return ob;
}

// ---------------------------------------------------------------------------
// A cluster of nodes with data groups.
// ---------------------------------------------------------------------------

/** How long a cluster may take until each data group is served by its preferred node. */
const CLUSTER_READY_TIMEOUT_MS = 60_000;

/**
 * A running cluster: its nodes (each an Omnibus), and stop(). The
 * connection strings of the Omnibus interface name node 3 (receivers)
 * and node 1's HTTP gateway (management); senderConnectionString names
 * node 2, so a message sent and received crosses nodes.
 */
export class OmnibusCluster {
  constructor(nodes, dir) {
    this.nodes = nodes;
    this.dir = dir;
  }

  get connectionString() {
    return this.nodes[this.nodes.length - 1].connectionString;
  }

  get senderConnectionString() {
    return this.nodes[1 % this.nodes.length].connectionString;
  }

  get adminConnectionString() {
    return this.nodes[0].adminConnectionString;
  }

  get httpPort() {
    return this.nodes[0].httpPort;
  }

  tail(lines = 30) {
    return this.nodes.map((n, i) => `-- node ${i + 1}:\n${n.tail(lines)}`).join("\n");
  }

  async stop() {
    await Promise.all(this.nodes.map((n) => n.stop()));
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * Builds (once) and starts a cluster of n nodes with groups data groups
 * (omnibus --groups) on loopback, as an operator makes one: `omnibus
 * cluster init` gives node 1 the peer CA and its certificate, and each
 * other node starts with a join token from `omnibus cluster token` (mutual
 * TLS on the peer ports). Returns once every data group g is served by
 * its preferred node (node g: the balancer hands it there within seconds;
 * a link to a group on the move is refused) and the meta group has a
 * leader that serves, as `omnibus cluster status --json` reports, and
 * that leader logged "applied the config file".
 */
export async function startCluster({ config = CONFIG, nodes = 3, groups = 3 } = {}) {
  const bin = await buildOmnibus();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "omnibus-jstest-cluster-"));
  const configPath = path.join(dir, "Config.json");
  fs.writeFileSync(configPath, JSON.stringify(config, null, 2));
  const peerPorts = [];
  for (let i = 0; i < nodes; i++) peerPorts.push(await freePort());
  const peers = peerPorts.map((p, i) => `${i + 1}=127.0.0.1:${p}`).join(",");
  const run = promisify(execFile);
  const started = [];
  const launching = [];
  const cluster = new OmnibusCluster(started, dir);
  try {
    const data1 = path.join(dir, "1");
    fs.mkdirSync(data1);
    await run(bin, ["cluster", "init", "--node-id", "1", "--data", data1]);
    for (let id = 1; id <= nodes; id++) {
      const data = path.join(dir, String(id));
      fs.mkdirSync(data, { recursive: true });
      const amqpPort = await freePort();
      const httpPort = await freePort();
      const args = [
        "serve",
        "--node-id", String(id),
        "--peers", peers,
        "--groups", String(groups),
        "--data", data,
        "--config", configPath,
        "--amqp-addr", `127.0.0.1:${amqpPort}`,
        "--http-addr", `127.0.0.1:${httpPort}`,
        "--https-addr", "-",
        "--amqps-addr", "-",
        "--key-name", KEY_NAME,
        "--key", KEY,
        "--metrics-addr", "127.0.0.1:0",
      ];
      if (id > 1) {
        const { stdout } = await run(bin, [
          "cluster", "token", "--addr", `127.0.0.1:${peerPorts[0]}`, "--node-id", String(id),
          "--data", data1, "--key-name", KEY_NAME, "--key", KEY, "--timeout", "30s",
        ]);
        args.push("--join-token", stdout.trim());
      }
      // Not awaited: a node says it is ready only once the meta leader
      // applied the config file, which takes a majority of the nodes up.
      launching.push(launch(bin, args, data, amqpPort, httpPort));
    }
    const results = await Promise.allSettled(launching);
    for (const r of results) if (r.status === "fulfilled") started.push(r.value);
    const failed = results.find((r) => r.status === "rejected");
    if (failed) throw failed.reason;
    await waitGroupsServed(bin, data1, peers, nodes, groups, cluster);
  } catch (err) {
    await cluster.stop();
    throw err;
  }
  return cluster;
}

async function waitGroupsServed(bin, data1, peers, nodes, groups, cluster) {
  const deadline = Date.now() + CLUSTER_READY_TIMEOUT_MS;
  let last = "";
  while (Date.now() < deadline) {
    try {
      const { stdout } = await promisify(execFile)(bin, ["cluster", "status", "--peers", peers, "--data", data1, "--json"]);
      const statuses = JSON.parse(stdout);
      const metaServed = statuses.some((s) => s.serving);
      const unserved = [];
      for (let g = 1; g <= groups; g++) {
        const want = ((g - 1) % nodes) + 1;
        const st = statuses.find((s) => s.id === want);
        const gs = st?.groups?.find((x) => x.group === g);
        if (!gs?.serving) unserved.push(g);
      }
      // The meta leader applies the config file's entities once elected,
      // after the nodes said they are ready: until then a link to one is
      // refused as not found.
      const configApplied = cluster.nodes.some((n) => n.output.includes("applied the config file"));
      if (metaServed && unserved.length === 0 && configApplied) return;
      last = `meta served: ${metaServed}, data groups not served by their preferred node: ${unserved}, config file applied: ${configApplied}`;
    } catch (err) {
      last = err.stderr || err.message;
    }
    await sleep(200);
  }
  throw new Error(`the cluster's groups were not served within ${CLUSTER_READY_TIMEOUT_MS} ms: ${last}\n${cluster.tail()}`);
}

async function waitForPort(port, timeoutMs, ob) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise((resolve) => {
      const sock = net.connect(port, "127.0.0.1");
      sock.once("connect", () => {
        sock.destroy();
        resolve(true);
      });
      sock.once("error", () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) {
      throw new Error(`omnibus said it is ready but nothing listens on AMQP port ${port}:\n${ob.tail()}`);
    }
    await sleep(50);
  }
}

/** Probes the HTTP gateway: true when GET /health answers at all. */
export async function httpGatewayUp(ob) {
  try {
    const res = await fetch(`http://127.0.0.1:${ob.httpPort}/health`, { signal: AbortSignal.timeout(2000) });
    await res.arrayBuffer();
    return res.status < 500;
  } catch {
    return false;
  }
}
