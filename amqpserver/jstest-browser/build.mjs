// Bundles page/app.mjs with the official SDK for the browser, the way the
// SDK's README asks bundlers to: the Node built-ins it uses (os, path)
// replaced by os-browserify and path-browserify, and the Buffer and
// process globals provided (page/shims.mjs). Run it by hand to look at the
// page: `node build.mjs out && npx http-server out` (any static server).

import * as esbuild from "esbuild";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));

/** Writes index.html and app.js (the bundle) to outdir. */
export async function buildPage(outdir) {
  fs.mkdirSync(outdir, { recursive: true });
  await esbuild.build({
    entryPoints: [path.join(here, "page", "app.mjs")],
    outfile: path.join(outdir, "app.js"),
    bundle: true,
    platform: "browser",
    format: "esm",
    target: "es2020",
    alias: { os: "os-browserify/browser", path: "path-browserify" },
    inject: [path.join(here, "page", "shims.mjs")],
    logLevel: "error",
  });
  fs.copyFileSync(path.join(here, "page", "index.html"), path.join(outdir, "index.html"));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const outdir = path.resolve(process.argv[2] ?? "out");
  await buildPage(outdir);
  console.log(`wrote ${outdir}/index.html and ${outdir}/app.js`);
}
