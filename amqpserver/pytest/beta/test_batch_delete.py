"""Batch delete with the SDK beta that has it (azure-servicebus 7.13.0b1;
7.15.0 has neither call): delete_messages and purge_messages send
com.microsoft:batch-delete-messages to the entity's $management node."""

import datetime
import time
import unittest

from azure.servicebus import ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.exceptions import ServiceBusError

import omnibus_env as env


class BatchDelete(unittest.TestCase):
    def setUp(self):
        self.client = env.client()
        self.addCleanup(self.client.close)

    def send(self, queue, bodies):
        with self.client.get_queue_sender(queue) as sender:
            sender.send_messages([ServiceBusMessage(b) for b in bodies])

    def test_delete_count_before_and_locked(self):
        self.send("py-delete", [f"old{i}" for i in range(5)])
        time.sleep(0.05)  # enqueued times are the broker's clock, in ms
        cut = datetime.datetime.now(datetime.timezone.utc)
        time.sleep(0.05)
        self.send("py-delete", ["new0", "new1"])
        with self.client.get_queue_receiver("py-delete") as receiver:
            [locked] = env.receive(receiver, 1)  # old0, locked: stays
            self.assertEqual(str(locked), "old0")
            self.assertEqual(receiver.delete_messages(max_message_count=2, before=cut), 2)  # old1, old2
            self.assertEqual(receiver.delete_messages(before=cut), 2)  # old3, old4
            self.assertEqual(receiver.delete_messages(before=cut), 0)
            self.assertEqual([str(m) for m in receiver.peek_messages(max_message_count=10)], ["old0", "new0", "new1"])
            receiver.complete_message(locked)
            self.assertEqual(receiver.delete_messages(), 2)
            self.assertEqual(receiver.peek_messages(max_message_count=10), [])
            # Service Bus's bound is 4,000 (the SDK shuts the receiver down
            # after the error, so this comes last).
            with self.assertRaises(ServiceBusError) as e:
                receiver.delete_messages(max_message_count=4001)
            self.assertIn("4000", str(e.exception))

    def test_purge_and_dead_letters(self):
        self.send("py-purge", [f"p{i}" for i in range(30)])
        with self.client.get_queue_receiver("py-purge") as receiver:
            self.assertEqual(receiver.purge_messages(), 30)
            self.assertEqual(receiver.peek_messages(max_message_count=5), [])
        self.send("py-delete-dlq", ["dead", "alive"])
        with self.client.get_queue_receiver("py-delete-dlq") as receiver:
            got = env.receive(receiver, 2)
            dead = [m for m in got if str(m) == "dead"][0]
            receiver.dead_letter_message(dead, reason="for purge")
            receiver.abandon_message([m for m in got if str(m) == "alive"][0])
        with self.client.get_queue_receiver("py-delete-dlq", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
            self.assertEqual(dlq.purge_messages(), 1)
            self.assertEqual(dlq.peek_messages(max_message_count=5), [])
        with self.client.get_queue_receiver("py-delete-dlq") as receiver:
            self.assertEqual([str(m) for m in receiver.peek_messages(max_message_count=5)], ["alive"])


if __name__ == "__main__":
    unittest.main()
