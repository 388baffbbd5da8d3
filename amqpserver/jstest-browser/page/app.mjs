// The page's script, bundled by build.mjs with the official SDK: send,
// receive (peek-lock) and complete against the queue the query string
// names, showing each step's result on the page.

import { ServiceBusClient } from "@azure/service-bus";

const params = new URLSearchParams(location.search);
const $ = (id) => document.getElementById(id);

async function run() {
  const connectionString = params.get("cs");
  const queue = params.get("queue");
  const n = Number(params.get("n") ?? 3);
  const expect = Number(params.get("expect") ?? n);
  $("origin").textContent = location.origin;
  $("endpoint").textContent = /Endpoint=([^;]*)/.exec(connectionString ?? "")?.[1] ?? "";
  $("status").textContent = "running";
  // One try per operation: a broker that is wrong fails the page at once.
  const client = new ServiceBusClient(connectionString, { retryOptions: { maxRetries: 0, timeoutInMs: 15000 } });
  try {
    const sender = client.createSender(queue);
    const messages = [];
    for (let i = 0; i < n; i++) messages.push({ body: `from-browser-${i}`, applicationProperties: { i } });
    await sender.sendMessages(messages);
    $("sent").textContent = String(n);
    await sender.close();

    const receiver = client.createReceiver(queue);
    const received = [];
    let completed = 0;
    const deadline = Date.now() + 30_000;
    while (received.length < expect && Date.now() < deadline) {
      const batch = await receiver.receiveMessages(expect - received.length, { maxWaitTimeInMs: 5000 });
      for (const m of batch) {
        received.push(m.body);
        $("received").textContent = JSON.stringify(received);
        await receiver.completeMessage(m);
        completed++;
        $("completed").textContent = String(completed);
      }
    }
    await receiver.close();
    $("status").textContent = "done";
  } catch (err) {
    $("error").textContent = `${err?.code ?? err?.name ?? "Error"}: ${err?.message ?? err}`;
    $("status").textContent = "error";
  } finally {
    await client.close().catch(() => {});
  }
}

run();
