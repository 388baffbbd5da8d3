"""Message sessions with the Python SDK over AMQPS: a named session, the
next available one, session state, lock renewal and a lapsed session lock."""

import time
import unittest
from datetime import datetime, timezone

from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusMessage
from azure.servicebus.exceptions import ServiceBusError

import omnibus_env as env


class Sessions(unittest.TestCase):
    def setUp(self):
        self.client = env.client()
        self.addCleanup(self.client.close)

    def test_named_and_next_available(self):
        with self.client.get_queue_sender("py-sessions") as sender:
            sender.send_messages([ServiceBusMessage(f"a{i}", session_id="alpha") for i in range(3)])
            sender.send_messages([ServiceBusMessage(f"b{i}", session_id="beta") for i in range(2)])
        with self.client.get_queue_receiver("py-sessions", session_id="beta") as receiver:
            got = env.receive(receiver, 2)
            self.assertEqual([str(m) for m in got], ["b0", "b1"])
            self.assertTrue(all(m.session_id == "beta" for m in got))
            for m in got:
                receiver.complete_message(m)
        with self.client.get_queue_receiver("py-sessions", session_id=NEXT_AVAILABLE_SESSION, max_wait_time=env.WAIT) as receiver:
            self.assertEqual(receiver.session.session_id, "alpha")
            got = env.receive(receiver, 3)
            self.assertEqual([str(m) for m in got], ["a0", "a1", "a2"])
            for m in got:
                receiver.complete_message(m)

    def test_state_and_lock(self):
        with self.client.get_queue_sender("py-session-state") as sender:
            sender.send_messages(ServiceBusMessage("with state", session_id="s1"))
        with self.client.get_queue_receiver("py-session-state", session_id="s1") as receiver:
            session = receiver.session
            self.assertIsNone(session.get_state())
            session.set_state(b"step 2")
            self.assertEqual(session.get_state(), b"step 2")
            before = session.locked_until_utc
            after = session.renew_lock()
            self.assertGreaterEqual(after, before)
            [m] = env.receive(receiver, 1)
            receiver.complete_message(m)
        with self.client.get_queue_receiver("py-session-state", session_id="s1") as receiver:
            self.assertEqual(receiver.session.get_state(), b"step 2")
            receiver.session.set_state(None)

    def test_settle_after_session_lock_expired(self):
        # omnibus detaches the receiver's link with session-lock-lost when
        # the session lock ends, as Service Bus does: the completion fails,
        # and the message stays for the session's next holder.
        with self.client.get_queue_sender("py-session-expire") as sender:
            sender.send_messages(ServiceBusMessage("once", session_id="lapse"))
        with self.client.get_queue_receiver("py-session-expire", session_id="lapse") as receiver:
            [m] = env.receive(receiver, 1)
            time.sleep(max(0, (receiver.session.locked_until_utc - datetime.now(timezone.utc)).total_seconds()) + 1.5)
            with self.assertRaises(ServiceBusError):
                receiver.complete_message(m)
        with self.client.get_queue_receiver("py-session-expire", session_id="lapse") as receiver:
            [m] = env.receive(receiver, 1)
            self.assertEqual(str(m), "once")
            self.assertEqual(m.delivery_count, 1)
            receiver.complete_message(m)


if __name__ == "__main__":
    unittest.main()
