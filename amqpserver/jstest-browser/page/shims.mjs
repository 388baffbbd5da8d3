// Globals the SDK's AMQP stack (rhea) expects from Node, as the SDK's
// README lists them for bundlers: esbuild's `inject` puts these wherever
// the bundle refers to `Buffer` or `process` without importing them.
export { Buffer } from "buffer";
import process from "process/browser.js";
export { process };
