// A program of its own, as a user's would be, for tls.test.mjs: Node reads
// NODE_EXTRA_CA_CERTS only when it starts. It sends one message to a
// queue with the connection string it is given, over AMQPS or (with
// "websocket") AMQP over WebSockets, receives and completes it, and
// prints "round trip: ok"; on failure it prints the error and exits 1.
//
//   node tls-client.mjs amqps|websocket <connection string> <queue>

import { ServiceBusClient } from "@azure/service-bus";
import WebSocket from "ws";

const [mode, connectionString, queue] = process.argv.slice(2);
const options = {
  retryOptions: { maxRetries: 0, timeoutInMs: 10_000 },
  ...(mode === "websocket" ? { webSocketOptions: { webSocket: WebSocket } } : {}),
};
const client = new ServiceBusClient(connectionString, options);
try {
  const body = `over ${mode}`;
  const sender = client.createSender(queue);
  await sender.sendMessages({ body });
  const receiver = client.createReceiver(queue);
  const [m] = await receiver.receiveMessages(1, { maxWaitTimeInMs: 10_000 });
  if (!m || m.body !== body) throw new Error(`received ${m ? JSON.stringify(m.body) : "nothing"}, want ${body}`);
  await receiver.completeMessage(m);
  console.log("round trip: ok");
  await client.close();
  process.exit(0);
} catch (err) {
  console.error(`${err.name}: ${err.message}`, err.code ?? "");
  process.exit(1);
}
