// What the browser test needs besides the broker: a static server for the
// page on an origin of its own, a home directory whose NSS database
// trusts omnibus's CA (where Chromium on Linux keeps the authorities a
// user imports), and Debian's Chromium, headless, driven by playwright-core.

import { execFile } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { chromium } from "playwright-core";

/** Debian's Chromium; playwright-core never downloads a browser of its own. */
export const CHROMIUM = process.env.OMNIBUS_CHROMIUM ?? "/usr/bin/chromium";

/**
 * Headless, and quiet on a closed network: without the background-networking
 * flags Chromium keeps trying Google's hosts.
 */
const FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** Fails with the install step to run when a tool the test needs is missing. */
export function requireTool(file, pkg) {
  if (!fs.existsSync(file)) {
    throw new Error(`${file} is missing: install Debian's ${pkg} (make jsdeps does, as root or with sudo)`);
  }
}

/**
 * Makes a home directory whose NSS database (~/.pki/nssdb) trusts caPath
 * for websites, as `certutil` does for a user (and Chromium's settings,
 * "Manage certificates" → Authorities → Import, do). No CA: an empty database.
 */
export async function homeTrusting(caPath) {
  requireTool("/usr/bin/certutil", "libnss3-tools");
  const home = fs.mkdtempSync(path.join(os.tmpdir(), "omnibus-browser-home-"));
  const db = path.join(home, ".pki", "nssdb");
  fs.mkdirSync(db, { recursive: true });
  const run = promisify(execFile);
  await run("certutil", ["-d", `sql:${db}`, "-N", "--empty-password"]);
  if (caPath) {
    await run("certutil", ["-d", `sql:${db}`, "-A", "-t", "C,,", "-n", "omnibus local CA", "-i", caPath]);
  }
  return home;
}

/** Launches headless Chromium with HOME set to home (a fresh profile each time). */
export async function launchChromium(home) {
  requireTool(CHROMIUM, "chromium");
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
    env: { ...process.env, HOME: home },
    timeout: 60_000,
  });
}

/** Serves dir's files on a free loopback port; returns its origin and close(). */
export async function serveStatic(dir) {
  const types = { ".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8" };
  const server = http.createServer((req, res) => {
    const name = new URL(req.url, "http://x").pathname.replace(/^\/$/, "/index.html");
    const file = path.join(dir, path.normalize(name));
    if (!file.startsWith(dir) || !fs.existsSync(file)) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "content-type": types[path.extname(file)] ?? "application/octet-stream" });
    fs.createReadStream(file).pipe(res);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    origin: `http://127.0.0.1:${server.address().port}`,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}
