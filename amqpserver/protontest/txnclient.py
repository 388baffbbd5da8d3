"""Qpid Proton transactions against omnibus, for the tests beside it.

The Go driver (cmd/omnibus/proton_test.go) starts the omnibus binary and
sets OMNIBUS_PROTON_URL (amqp://host:port) and OMNIBUS_PROTON_USER /
OMNIBUS_PROTON_PASSWORD (a key name and its key, for SASL PLAIN).

run_txn() drives one transaction with Proton's own transaction API
(Container.declare_transaction, Transaction.accept / send / commit /
abort): it receives the given number of messages from a queue (peek-lock),
settles them inside the transaction, sends messages inside it, and
discharges it; it returns what happened, outcome by outcome.
"""

import os

from proton import Link, Message, Timeout, symbol
from proton.handlers import MessagingHandler, TransactionHandler
from proton.reactor import Container, ReceiverOption, SenderOption
from proton.utils import BlockingConnection

URL = os.environ["OMNIBUS_PROTON_URL"]
USER = os.environ["OMNIBUS_PROTON_USER"]
PASSWORD = os.environ["OMNIBUS_PROTON_PASSWORD"]

# Bounds for every wait, so a broker bug fails a test instead of hanging.
WAIT = 20

TRANSFER_DESTINATION = symbol("com.microsoft:transfer-destination-address")
TXN_STATE = 0x34  # transactional-state, the state of a delivery inside a transaction


def blocking():
    """A blocking connection for setting up and checking queues."""
    return BlockingConnection(URL, timeout=WAIT, user=USER, password=PASSWORD,
                              allowed_mechs="PLAIN", allow_insecure_mechs=True)


def send_plain(queue, bodies):
    """Sends bodies to queue outside any transaction."""
    conn = blocking()
    try:
        snd = conn.create_sender(queue)
        for b in bodies:
            snd.send(Message(body=b))
    finally:
        conn.close()


def drain(queue, wait=1.0, expect=0):
    """Receives everything available on queue (Proton's blocking receiver
    accepts each message: a complete), returning the bodies. It waits up to
    WAIT seconds for the first expect messages, then wait seconds for each
    further one, so that a message on its way is not missed.

    Only a receive that times out means "nothing more": a link the broker
    refused or detached, or a connection it closed, raises (LinkDetached,
    ConnectionClosed, ...), so that an empty answer is never taken from a
    queue that could not be read."""
    conn = blocking()
    got = []
    try:
        rcv = conn.create_receiver(queue, credit=100)
        while True:
            try:
                m = rcv.receive(timeout=WAIT if len(got) < expect else wait)
            except Timeout:
                break
            got.append(m.body)
    finally:
        conn.close()
    return got


class PeekLock(ReceiverOption):
    """Peek-lock as the Service Bus SDKs ask for it: the receiver settles
    second, the sender sends unsettled."""

    def apply(self, link):
        link.snd_settle_mode = Link.SND_UNSETTLED
        link.rcv_settle_mode = Link.RCV_SECOND


class SendVia(SenderOption):
    """Service Bus's send-via: the sender attaches to one entity and its
    messages are stored in destination, through it."""

    def __init__(self, destination):
        self.destination = destination

    def apply(self, link):
        link.properties = {TRANSFER_DESTINATION: self.destination}


class Outcome:
    """What happened to a transaction run by run_txn."""

    def __init__(self):
        self.declared = False
        self.txn_id = None
        self.received = []          # bodies taken from the input queue
        self.settle_states = []     # remote state of each transactional settlement
        self.send_states = []       # remote state of each transactional send
        self.send_errors = []       # condition of each rejected send
        self.discharge = None       # "committed", "aborted", "commit-failed"
        self.error = None


class _Txn(MessagingHandler, TransactionHandler):
    def __init__(self, in_queue, n_in, sends, commit, send_via=None, out_queue=None,
                 before_discharge=None, pause=0.0):
        super().__init__(prefetch=0, auto_accept=False, auto_settle=True)
        self.in_queue, self.n_in, self.sends, self.commit = in_queue, n_in, sends, commit
        self.send_via, self.out_queue = send_via, out_queue
        self.before_discharge = before_discharge
        self.pause = pause
        self.o = Outcome()
        self.txn = None
        self.deliveries = []
        self.pending_sends = 0
        self.sent = False
        self.timer = None

    def on_start(self, event):
        self.container = event.container
        self.conn = event.container.connect(URL, user=USER, password=PASSWORD,
                                            allowed_mechs="PLAIN", allow_insecure_mechs=True)
        if self.n_in:
            self.receiver = event.container.create_receiver(self.conn, self.in_queue, options=PeekLock())
            self.receiver.flow(self.n_in)
        target = self.send_via or self.out_queue
        if target:
            opts = [SendVia(self.out_queue)] if self.send_via else None
            self.sender = event.container.create_sender(self.conn, target, options=opts)
        event.container.declare_transaction(self.conn, handler=self)
        self.timer = event.container.schedule(WAIT, self)

    def on_timer_task(self, event):
        if self.o.discharge is None and self.o.error is None:
            self.o.error = "timed out"
            self.conn.close()

    def on_transaction_declared(self, event):
        self.txn = event.transaction
        self.o.declared = True
        self.o.txn_id = self.txn.id
        self._work()

    def on_transaction_declare_failed(self, event):
        self.o.error = "declare failed"
        self.conn.close()

    def on_message(self, event):
        self.o.received.append(event.message.body)
        self.deliveries.append(event.delivery)
        self._work()

    def _work(self):
        if self.txn is None or len(self.deliveries) < self.n_in or self.sent:
            return
        self.sent = True
        for d in self.deliveries:
            self.txn.accept(d)
        for body in self.sends:
            self.txn.send(self.sender, Message(body=body))
            self.pending_sends += 1
        if not self.sends:
            self._discharge()

    def on_settled(self, event):
        # The answers to transactional sends (and dispositions).
        if event.link.is_sender:
            self._send_answered(event.delivery)

    def on_rejected(self, event):
        # on_settled follows for the same delivery.
        if event.link.is_sender:
            cond = event.delivery.remote.condition
            self.o.send_errors.append(cond.name if cond else "rejected")

    def _send_answered(self, delivery):
        self.o.send_states.append(delivery.remote_state)
        self.pending_sends -= 1
        if self.pending_sends == 0:
            self._discharge()

    def _discharge(self):
        if self.before_discharge:
            self.before_discharge(self)
        if self.pause:
            self.container.schedule(self.pause, _Later(self._do_discharge))
        else:
            self._do_discharge()

    def _do_discharge(self):
        for d in self.deliveries:
            self.o.settle_states.append(d.remote_state)
        if self.commit:
            self.txn.commit()
        else:
            self.txn.abort()

    def on_transaction_committed(self, event):
        self.o.discharge = "committed"
        self._done()

    def on_transaction_aborted(self, event):
        self.o.discharge = "aborted"
        self._done()

    def on_transaction_commit_failed(self, event):
        self.o.discharge = "commit-failed"
        cond = event.delivery.remote.condition
        self.o.error = cond.name if cond else None
        self._done()

    def _done(self):
        if self.timer:
            self.timer.cancel()
        self.conn.close()


class _Later:
    def __init__(self, f):
        self.f = f

    def on_timer_task(self, event):
        self.f()


def run_txn(in_queue=None, n_in=0, sends=(), out_queue=None, commit=True, send_via=None,
            before_discharge=None, pause=0.0):
    """Runs one transaction and returns its Outcome."""
    h = _Txn(in_queue, n_in, list(sends), commit, send_via=send_via, out_queue=out_queue,
             before_discharge=before_discharge, pause=pause)
    Container(h).run()
    return h.o
