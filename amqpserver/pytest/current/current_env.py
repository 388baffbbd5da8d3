"""What only today's SDK (azure-servicebus 7.15, pyamqp) is given by the Go
driver (amqpserver/python_current_test.go), besides omnibus_env's.

- OMNIBUS_PY_WEBSOCKET_ENDPOINT: sb://<address>:<HTTPS port>, passed as
  custom_endpoint_address: the SDK opens wss://<that>/$servicebus/websocket
  (without it, wss on port 443 of the namespace's host).
- OMNIBUS_PY_EMULATOR_CONNECTION_STRING: the emulator's connection string,
  Endpoint=sb://127.0.0.1:<AMQP port>;...;UseDevelopmentEmulator=true: plain
  AMQP on the endpoint's port, no TLS.
"""

import os
import time

import omnibus_env as env

WEBSOCKET_ENDPOINT = os.environ["OMNIBUS_PY_WEBSOCKET_ENDPOINT"]
EMULATOR_CONNECTION_STRING = os.environ["OMNIBUS_PY_EMULATOR_CONNECTION_STRING"]

# Few retries, so a broker bug fails a test at once instead of after the
# SDK's back-off.
RETRIES = {"retry_total": 1, "retry_backoff_factor": 0.2}


def websocket_client():
    """A ServiceBusClient speaking AMQP over WebSockets on the HTTPS port."""
    from azure.servicebus import ServiceBusClient, TransportType

    return ServiceBusClient.from_connection_string(
        env.CONNECTION_STRING, transport_type=TransportType.AmqpOverWebsocket,
        custom_endpoint_address=WEBSOCKET_ENDPOINT, connection_verify=env.CA, **RETRIES)


def async_client(**kwargs):
    """An azure.servicebus.aio.ServiceBusClient on AMQPS (or as kwargs say)."""
    from azure.servicebus.aio import ServiceBusClient

    return ServiceBusClient.from_connection_string(env.CONNECTION_STRING, connection_verify=env.CA, **RETRIES, **kwargs)


async def receive_async(receiver, n, wait=env.WAIT):
    """Receives until n messages came or wait seconds passed (async)."""
    got = []
    deadline = time.monotonic() + wait
    while len(got) < n and time.monotonic() < deadline:
        got += await receiver.receive_messages(max_message_count=n - len(got),
                                               max_wait_time=max(1, deadline - time.monotonic()))
    return got
