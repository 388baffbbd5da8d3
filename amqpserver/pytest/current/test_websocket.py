"""AMQP over WebSockets (TransportType.AmqpOverWebsocket) with today's SDK:
the sync client (websocket-client) and the async one (aiohttp), on the
HTTPS port at /$servicebus/websocket, trusting the local CA."""

import asyncio
import unittest

from azure.servicebus import ServiceBusMessage, ServiceBusSubQueue, TransportType

import current_env
import omnibus_env as env


class WebSockets(unittest.TestCase):
    def test_sync_send_receive_settle_peek(self):
        with current_env.websocket_client() as client:
            with client.get_queue_sender("py-ws") as sender:
                sender.send_messages([ServiceBusMessage(f"ws{i}", message_id=f"ws-{i}") for i in range(3)])
            with client.get_queue_receiver("py-ws") as receiver:
                # peek is a $management request: a second link pair on the
                # same WebSocket.
                self.assertEqual([str(m) for m in receiver.peek_messages(max_message_count=10)], ["ws0", "ws1", "ws2"])
                got = env.receive(receiver, 3)
                self.assertEqual([str(m) for m in got], ["ws0", "ws1", "ws2"])
                self.assertEqual([m.message_id for m in got], ["ws-0", "ws-1", "ws-2"])
                before = got[0].locked_until_utc
                self.assertGreaterEqual(receiver.renew_message_lock(got[0]), before)
                receiver.complete_message(got[0])
                receiver.dead_letter_message(got[1], reason="over-ws")
                receiver.abandon_message(got[2])
                [again] = env.receive(receiver, 1)
                self.assertEqual((str(again), again.delivery_count), ("ws2", 1))
                receiver.complete_message(again)
            with client.get_queue_receiver("py-ws", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
                [d] = env.receive(dlq, 1)
                self.assertEqual((str(d), d.dead_letter_reason), ("ws1", "over-ws"))
                dlq.complete_message(d)

    def test_async_send_receive(self):
        async def run():
            async with current_env.async_client(transport_type=TransportType.AmqpOverWebsocket,
                                                custom_endpoint_address=current_env.WEBSOCKET_ENDPOINT) as client:
                async with client.get_queue_sender("py-ws-async") as sender:
                    batch = await sender.create_message_batch()
                    for i in range(5):
                        batch.add_message(ServiceBusMessage(f"a{i}"))
                    await sender.send_messages(batch)
                async with client.get_queue_receiver("py-ws-async") as receiver:
                    got = await current_env.receive_async(receiver, 5)
                    self.assertEqual([str(m) for m in got], [f"a{i}" for i in range(5)])
                    for m in got:
                        await receiver.complete_message(m)
                    self.assertEqual(await receiver.peek_messages(max_message_count=5), [])

        asyncio.run(run())


if __name__ == "__main__":
    unittest.main()
