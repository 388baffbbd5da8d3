"""The async client (azure.servicebus.aio) of today's SDK over AMQPS: send,
receive, every settlement, lock renewal, deferral, scheduling, peek and
sessions with state, as an asyncio application calls them."""

import asyncio
import datetime
import unittest

from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusMessage, ServiceBusReceiveMode, ServiceBusSubQueue
from azure.servicebus.aio import AutoLockRenewer

import current_env
import omnibus_env as env


class Async(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.client = current_env.async_client()
        self.addAsyncCleanup(self.client.close)

    async def test_settle_renew_defer(self):
        async with self.client.get_queue_sender("py-async") as sender:
            await sender.send_messages([ServiceBusMessage(b, application_properties={"i": i})
                                        for i, b in enumerate(["complete", "abandon", "defer", "dead-letter"])])
        async with self.client.get_queue_receiver("py-async") as receiver:
            got = {str(m): m for m in await current_env.receive_async(receiver, 4)}
            self.assertEqual(sorted(got), ["abandon", "complete", "dead-letter", "defer"])
            self.assertEqual(got["defer"].application_properties[b"i"], 2)
            before = got["complete"].locked_until_utc
            self.assertGreaterEqual(await receiver.renew_message_lock(got["complete"]), before)
            locked_until = got["complete"].locked_until_utc
            await receiver.complete_message(got["complete"])
            await receiver.abandon_message(got["abandon"])
            deferred = got["defer"].sequence_number
            await receiver.defer_message(got["defer"])
            await receiver.dead_letter_message(got["dead-letter"], reason="async", error_description="from asyncio")
            [again] = await current_env.receive_async(receiver, 1)
            self.assertEqual((str(again), again.delivery_count), ("abandon", 1))
            await receiver.complete_message(again)
            [d] = await receiver.receive_deferred_messages([deferred])
            self.assertEqual(str(d), "defer")
            await receiver.complete_message(d)
            # py-async's lock lasts 5 s: a complete the broker ignored
            # would bring the message back once it lapses.
            left = (locked_until - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
            self.assertEqual(await current_env.receive_async(receiver, 1, wait=max(0, left) + 1.5), [])
        async with self.client.get_queue_receiver("py-async", sub_queue=ServiceBusSubQueue.DEAD_LETTER,
                                                  receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as dlq:
            [m] = await current_env.receive_async(dlq, 1)
            self.assertEqual((str(m), m.dead_letter_reason, m.dead_letter_error_description),
                             ("dead-letter", "async", "from asyncio"))

    async def test_auto_lock_renewer(self):
        # The lock lasts 5 s; AutoLockRenewer keeps it for longer, so the
        # message completes after the lock first ran out.
        async with self.client.get_queue_sender("py-async") as sender:
            await sender.send_messages(ServiceBusMessage("held"))
        renewer = AutoLockRenewer(max_lock_renewal_duration=30)
        self.addAsyncCleanup(renewer.close)
        async with self.client.get_queue_receiver("py-async", auto_lock_renewer=renewer) as receiver:
            [m] = await current_env.receive_async(receiver, 1)
            first = m.locked_until_utc
            # The SDK's renewer runs on the wall clock: wait until the
            # first lock has run out, then complete, which only a lock the
            # broker renewed allows.
            deadline = first + datetime.timedelta(seconds=1)
            while datetime.datetime.now(datetime.timezone.utc) < deadline:
                await asyncio.sleep(0.2)
            self.assertGreater(m.locked_until_utc, first)
            await receiver.complete_message(m)

    async def test_schedule_peek_cancel(self):
        later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
        async with self.client.get_queue_sender("py-async") as sender:
            seqs = await sender.schedule_messages([ServiceBusMessage("s1"), ServiceBusMessage("s2")], later)
            async with self.client.get_queue_receiver("py-async") as receiver:
                peeked = await receiver.peek_messages(max_message_count=10)
                self.assertEqual(sorted(m.sequence_number for m in peeked), sorted(seqs))
                await sender.cancel_scheduled_messages(seqs)
                self.assertEqual(await receiver.peek_messages(max_message_count=10), [])

    async def test_sessions_iterate_and_state(self):
        async with self.client.get_queue_sender("py-async-session") as sender:
            await sender.send_messages([ServiceBusMessage(f"m{i}", session_id="s-async") for i in range(3)])
        async with self.client.get_queue_receiver("py-async-session", session_id=NEXT_AVAILABLE_SESSION,
                                                  max_wait_time=3) as receiver:
            session = receiver.session
            self.assertEqual(session.session_id, "s-async")
            await session.set_state(b"async state")
            self.assertEqual(await session.get_state(), b"async state")
            self.assertGreater(await session.renew_lock(), datetime.datetime.now(datetime.timezone.utc))
            bodies = []
            async for m in receiver:  # ends when max_wait_time passes without one
                bodies.append(str(m))
                await receiver.complete_message(m)
            self.assertEqual(bodies, ["m0", "m1", "m2"])
            await session.set_state(None)


if __name__ == "__main__":
    unittest.main()
