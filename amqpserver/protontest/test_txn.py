"""Transactions with Qpid Proton's transaction API against the omnibus binary.

Queues (from the driver's Config.json): txn-in, txn-out, txn-other, and
txn-short (lock duration 5 s). The broker runs with --txn-timeout 3s.
"""

import unittest

from proton.utils import LinkDetached

from txnclient import TXN_STATE, drain, run_txn, send_plain


class TransactionTest(unittest.TestCase):
    def setUp(self):
        for q in ("txn-in", "txn-out", "txn-other", "txn-short"):
            drain(q, wait=0.3)

    def test_commit_completes_and_sends_at_once(self):
        send_plain("txn-in", ["work"])
        seen = {}

        def before(h):
            # Nothing of the transaction is visible before the commit.
            seen["out"] = drain("txn-out", wait=0.5)

        o = run_txn("txn-in", 1, ["result-1", "result-2"], "txn-out", commit=True, send_via="txn-in",
                    before_discharge=before)
        self.assertIsNone(o.error)
        self.assertTrue(o.txn_id.startswith(b"txn:"), o.txn_id)
        self.assertEqual(o.received, ["work"])
        self.assertEqual(o.send_states, [TXN_STATE, TXN_STATE])
        self.assertEqual(o.discharge, "committed")
        self.assertEqual(seen["out"], [])
        self.assertEqual(drain("txn-out", expect=2), ["result-1", "result-2"])
        self.assertEqual(drain("txn-in"), [])

    def test_rollback_changes_nothing(self):
        send_plain("txn-short", ["keep me"])
        o = run_txn("txn-short", 1, ["never"], "txn-short", commit=False)
        self.assertIsNone(o.error)
        self.assertEqual(o.discharge, "aborted")
        # The rolled-back completion changed nothing: Proton releases the
        # delivery after the abort, the message is there again (or after
        # its 5 s lock at worst), and the sent message never appears.
        self.assertEqual(drain("txn-short", expect=1), ["keep me"])

    def test_second_entity_refused(self):
        send_plain("txn-short", ["input"])
        o = run_txn("txn-short", 1, ["elsewhere"], "txn-other", commit=True)
        self.assertEqual(o.send_errors, ["amqp:not-allowed"])
        # The refused send doomed the transaction: its commit fails and
        # the completion did not happen (the input is back, after its 5 s
        # lock at worst), as in Service Bus.
        self.assertEqual(o.discharge, "commit-failed")
        self.assertEqual(o.error, "amqp:transaction:rollback")
        self.assertEqual(drain("txn-other"), [])
        self.assertEqual(drain("txn-short", expect=1), ["input"])

    def test_same_entity_needs_no_via(self):
        send_plain("txn-in", ["first"])
        o = run_txn("txn-in", 1, ["second"], "txn-in", commit=True)
        self.assertIsNone(o.error)
        self.assertEqual(o.settle_states, [TXN_STATE])
        self.assertEqual(o.discharge, "committed")
        self.assertEqual(drain("txn-in", expect=1), ["second"])

    def test_drain_fails_on_a_refused_link(self):
        # The negative checks above (drain(...) == []) mean something only
        # if drain cannot read a refused link as an empty queue.
        with self.assertRaises(LinkDetached):
            drain("txn-no-such-queue")

    def test_timeout_rolls_back(self):
        o = run_txn(None, 0, ["too slow"], "txn-out", commit=True, pause=4.0)
        self.assertEqual(o.discharge, "commit-failed")
        self.assertEqual(o.error, "amqp:transaction:timeout")
        self.assertEqual(drain("txn-out"), [])


if __name__ == "__main__":
    unittest.main()
