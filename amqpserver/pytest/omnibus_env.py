"""What the Go driver (amqpserver/python_test.go) tells the tests.

The broker it starts serves AMQPS on 5671 of a loopback address of its own
(the SDK always dials 5671) and HTTPS on another port, with a certificate
of its local CA. The tests use the ordinary connection string, as a cloud
namespace has it, and trust the CA the two ways cmd/omnibus/README.md gives:
connection_verify for AMQP, REQUESTS_CA_BUNDLE (set by the driver) for the
administration client.
"""

import os

CONNECTION_STRING = os.environ["OMNIBUS_PY_CONNECTION_STRING"]
ADMIN_CONNECTION_STRING = os.environ["OMNIBUS_PY_ADMIN_CONNECTION_STRING"]
CA = os.environ["OMNIBUS_PY_CA"]

# Bounds for every wait, so a broker bug fails a test instead of hanging.
WAIT = 10


def client():
    """A ServiceBusClient on the broker, trusting its CA, with few retries."""
    from azure.servicebus import ServiceBusClient

    return ServiceBusClient.from_connection_string(
        CONNECTION_STRING, connection_verify=CA, retry_total=1, retry_backoff_factor=0.2
    )


def receive(receiver, n, wait=WAIT):
    """Receives until n messages came or wait seconds passed."""
    import time

    got = []
    deadline = time.monotonic() + wait
    while len(got) < n and time.monotonic() < deadline:
        got += receiver.receive_messages(max_message_count=n - len(got), max_wait_time=max(1, deadline - time.monotonic()))
    return got


def receive_none_past_lock(receiver, locked_until, margin=1.5):
    """Receives until margin seconds after locked_until and returns what came.

    A message whose settlement the broker ignored stays locked, and so out of
    sight, until its lock lapses: only a wait past the lock shows it is gone.
    Use it on a queue with a short lock (PT5S).
    """
    import datetime
    import time

    if locked_until.tzinfo is None:
        locked_until = locked_until.replace(tzinfo=datetime.timezone.utc)
    left = (locked_until - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
    deadline = time.monotonic() + max(0, left) + margin
    got = []
    while not got and time.monotonic() < deadline:
        got += receiver.receive_messages(max_message_count=1, max_wait_time=max(0.5, deadline - time.monotonic()))
    return got
