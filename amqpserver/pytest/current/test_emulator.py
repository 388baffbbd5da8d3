"""The emulator's connection string (UseDevelopmentEmulator=true): today's
SDK then speaks plain AMQP (no TLS) to the port in the endpoint, sync and
async. (Debian's 7.8 on uamqp ignores the setting and dials TLS on 5671.)"""

import asyncio
import unittest

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient

import current_env
import omnibus_env as env


class Emulator(unittest.TestCase):
    def test_sync_plain_amqp(self):
        with ServiceBusClient.from_connection_string(current_env.EMULATOR_CONNECTION_STRING, **current_env.RETRIES) as client:
            with client.get_queue_sender("py-emulator") as sender:
                sender.send_messages([ServiceBusMessage("e1"), ServiceBusMessage("e2")])
            with client.get_queue_receiver("py-emulator") as receiver:
                self.assertEqual([str(m) for m in receiver.peek_messages(max_message_count=5)], ["e1", "e2"])
                got = env.receive(receiver, 2)
                self.assertEqual([str(m) for m in got], ["e1", "e2"])
                for m in got:
                    receiver.complete_message(m)

    def test_async_plain_amqp(self):
        async def run():
            async with AsyncServiceBusClient.from_connection_string(current_env.EMULATOR_CONNECTION_STRING,
                                                                    **current_env.RETRIES) as client:
                async with client.get_queue_sender("py-emulator") as sender:
                    await sender.send_messages(ServiceBusMessage("async e"))
                async with client.get_queue_receiver("py-emulator", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
                    got = await current_env.receive_async(receiver, 1)
                    self.assertEqual([str(m) for m in got], ["async e"])

        asyncio.run(run())


if __name__ == "__main__":
    unittest.main()
