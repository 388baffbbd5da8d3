"""Send, receive, settle, schedule and dead-letter with the Python SDK
(azure-servicebus 7.8 on uamqp) over AMQPS."""

import datetime
import unittest

from azure.servicebus import ServiceBusMessage, ServiceBusReceiveMode, ServiceBusSubQueue
from azure.servicebus.exceptions import MessageNotFoundError

import omnibus_env as env


class Messaging(unittest.TestCase):
    def setUp(self):
        self.client = env.client()
        self.addCleanup(self.client.close)

    def test_send_receive_complete(self):
        with self.client.get_queue_sender("py-basic") as sender:
            sender.send_messages(ServiceBusMessage("hello", application_properties={"kind": "greeting", "n": 7},
                                                   subject="hi", message_id="m-1", content_type="text/plain"))
        with self.client.get_queue_receiver("py-basic") as receiver:
            [m] = env.receive(receiver, 1)
            self.assertEqual(str(m), "hello")
            self.assertEqual(m.delivery_count, 0)
            self.assertEqual(m.message_id, "m-1")
            self.assertEqual(m.subject, "hi")
            self.assertEqual(m.content_type, "text/plain")
            self.assertEqual(m.application_properties[b"kind"], b"greeting")
            self.assertEqual(m.application_properties[b"n"], 7)
            self.assertGreater(m.sequence_number, 0)
            locked_until = m.locked_until_utc  # the SDK forgets it once settled
            self.assertIsNotNone(locked_until)
            receiver.complete_message(m)
            # py-basic's lock lasts 5 s: a complete the broker ignored would
            # bring the message back once it lapses, so wait past it.
            self.assertEqual(env.receive_none_past_lock(receiver, locked_until), [])

    def test_batch_and_receive_and_delete(self):
        with self.client.get_queue_sender("py-batch") as sender:
            batch = sender.create_message_batch()
            for i in range(20):
                batch.add_message(ServiceBusMessage(f"m{i}"))
            sender.send_messages(batch)
            sender.send_messages([ServiceBusMessage("list-1"), ServiceBusMessage("list-2")])
        with self.client.get_queue_receiver("py-batch", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
            got = env.receive(receiver, 22)
            self.assertEqual([str(m) for m in got], [f"m{i}" for i in range(20)] + ["list-1", "list-2"])
        with self.client.get_queue_receiver("py-batch") as receiver:
            self.assertEqual(receiver.receive_messages(max_message_count=5, max_wait_time=1), [])

    def test_abandon_defer_dead_letter_renew(self):
        with self.client.get_queue_sender("py-settle") as sender:
            sender.send_messages([ServiceBusMessage("abandon-me"), ServiceBusMessage("defer-me"), ServiceBusMessage("dead-letter-me")])
        with self.client.get_queue_receiver("py-settle") as receiver:
            m = env.receive(receiver, 1)[0]
            self.assertEqual(str(m), "abandon-me")
            before = m.locked_until_utc
            after = receiver.renew_message_lock(m)
            self.assertGreaterEqual(after, before)
            receiver.abandon_message(m)
            again = env.receive(receiver, 3)
            self.assertEqual(sorted(str(x) for x in again), ["abandon-me", "dead-letter-me", "defer-me"])
            by_body = {str(x): x for x in again}
            self.assertEqual(by_body["abandon-me"].delivery_count, 1)
            receiver.complete_message(by_body["abandon-me"])
            deferred_seq = by_body["defer-me"].sequence_number
            receiver.defer_message(by_body["defer-me"])
            receiver.dead_letter_message(by_body["dead-letter-me"], reason="bad", error_description="it was bad")
            [d] = receiver.receive_deferred_messages([deferred_seq])
            self.assertEqual(str(d), "defer-me")
            receiver.complete_message(d)
        with self.client.get_queue_receiver("py-settle", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
            [m] = env.receive(dlq, 1)
            self.assertEqual(str(m), "dead-letter-me")
            self.assertEqual(m.dead_letter_reason, "bad")
            self.assertEqual(m.dead_letter_error_description, "it was bad")
            dlq.complete_message(m)

    def test_unknown_sequence_number(self):
        # (A link to an entity that does not exist is not tried: uamqp
        # 1.5.3 crashes the interpreter closing the connection after its
        # put-token is answered 404, as Service Bus answers it.)
        with self.client.get_queue_receiver("py-lock") as receiver:
            with self.assertRaises(MessageNotFoundError):
                receiver.receive_deferred_messages([987654])

    def test_schedule_peek_cancel(self):
        later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
        soon = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=1)
        with self.client.get_queue_sender("py-schedule") as sender:
            [cancel_seq] = sender.schedule_messages(ServiceBusMessage("cancel-me"), later)
            [due_seq] = sender.schedule_messages(ServiceBusMessage("due-soon"), soon)
            self.assertNotEqual(cancel_seq, due_seq)
            with self.client.get_queue_receiver("py-schedule") as receiver:
                peeked = receiver.peek_messages(max_message_count=10)
                self.assertEqual(sorted(m.sequence_number for m in peeked), sorted([cancel_seq, due_seq]))
                scheduled = {m.sequence_number: m for m in peeked}[cancel_seq]
                self.assertEqual(scheduled.scheduled_enqueue_time_utc.replace(microsecond=0),
                                 later.replace(microsecond=0))
                sender.cancel_scheduled_messages(cancel_seq)
                [m] = env.receive(receiver, 1)
                self.assertEqual(str(m), "due-soon")
                receiver.complete_message(m)
                self.assertEqual(receiver.peek_messages(max_message_count=10), [])

    def test_topic_and_subscriptions(self):
        with self.client.get_topic_sender("py-topic") as sender:
            sender.send_messages([ServiceBusMessage("red one", application_properties={"color": "red"}),
                                  ServiceBusMessage("blue one", application_properties={"color": "blue"})])
        with self.client.get_subscription_receiver("py-topic", "all") as receiver:
            got = env.receive(receiver, 2)
            self.assertEqual(sorted(str(m) for m in got), ["blue one", "red one"])
            for m in got:
                receiver.complete_message(m)
        with self.client.get_subscription_receiver("py-topic", "red") as receiver:
            [m] = env.receive(receiver, 1)
            self.assertEqual(str(m), "red one")
            receiver.complete_message(m)
            self.assertEqual(receiver.receive_messages(max_message_count=1, max_wait_time=1), [])


if __name__ == "__main__":
    unittest.main()
