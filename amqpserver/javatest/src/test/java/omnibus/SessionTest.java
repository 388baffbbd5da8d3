package omnibus;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.azure.core.amqp.exception.AmqpErrorCondition;
import com.azure.core.amqp.exception.AmqpException;
import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusProcessorClient;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.messaging.servicebus.ServiceBusSessionReceiverClient;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/** Session receivers and the session processor: FIFO per session, session state, session locks. */
@Timeout(60)
class SessionTest {
    private static final Map<String, Object> SESSIONS = Map.of("RequiresSession", true);

    @RegisterExtension
    static final OmnibusExtension omnibus = new OmnibusExtension(new Entities()
        .queue("fifo", SESSIONS)
        .queue("state", SESSIONS)
        .queue("locked", SESSIONS)
        .queue("processor", SESSIONS)
        .queue("session-renew", Map.of("RequiresSession", true, "LockDuration", "PT5S"))
        .queue("session-expire", Map.of("RequiresSession", true, "LockDuration", "PT5S"))
        .topic("session-topic", Entities.subscription("by-session", SESSIONS)));

    @Test
    void sessionReceiverGetsEachSessionInOrder() {
        ServiceBusClientBuilder b = omnibus.broker().client();
        try (ServiceBusSenderClient sender = b.sender().queueName("fifo").buildClient()) {
            for (int i = 0; i < 4; i++) {
                sender.sendMessage(new ServiceBusMessage("a" + i).setSessionId("a"));
                sender.sendMessage(new ServiceBusMessage("b" + i).setSessionId("b"));
            }
        }
        ServiceBusSessionReceiverClient sessions = b.sessionReceiver().queueName("fifo").buildClient();
        try {
            try (ServiceBusReceiverClient b1 = sessions.acceptSession("b")) {
                assertEquals("b", b1.getSessionId());
                List<ServiceBusReceivedMessage> got = Receive.n(b1, 4);
                assertEquals(List.of("b0", "b1", "b2", "b3"), Receive.bodies(got), "session b, in order");
                for (ServiceBusReceivedMessage m : got) {
                    assertEquals("b", m.getSessionId());
                    b1.complete(m);
                }
            }
            try (ServiceBusReceiverClient next = sessions.acceptNextSession()) {
                assertEquals("a", next.getSessionId(), "the next session with messages");
                List<ServiceBusReceivedMessage> got = Receive.n(next, 4);
                assertEquals(List.of("a0", "a1", "a2", "a3"), Receive.bodies(got), "session a, in order");
                next.abandon(got.get(0));
                // Abandoned in a session: it comes back first.
                List<ServiceBusReceivedMessage> again = Receive.n(next, 1);
                assertEquals("a0", again.get(0).getBody().toString());
                assertEquals(1, again.get(0).getDeliveryCount());
                next.complete(again.get(0));
                for (ServiceBusReceivedMessage m : got.subList(1, 4)) {
                    next.complete(m);
                }
            }
        } finally {
            sessions.close();
        }
    }

    @Test
    void sessionStateIsKeptAndTheSessionLockRenewed() {
        ServiceBusClientBuilder b = omnibus.broker().client();
        try (ServiceBusSenderClient sender = b.sender().queueName("state").buildClient()) {
            sender.sendMessage(new ServiceBusMessage("s").setSessionId("with-state"));
        }
        ServiceBusSessionReceiverClient sessions = b.sessionReceiver().queueName("state").buildClient();
        try {
            try (ServiceBusReceiverClient r = sessions.acceptSession("with-state")) {
                assertEquals(null, r.getSessionState(), "no state yet");
                byte[] state = "step=2".getBytes(StandardCharsets.UTF_8);
                r.setSessionState(state);
                assertArrayEquals(state, r.getSessionState());
                OffsetDateTime renewed = r.renewSessionLock();
                assertTrue(renewed.isAfter(OffsetDateTime.now()), "session locked until " + renewed);
                r.complete(Receive.n(r, 1).get(0));
            }
        } finally {
            sessions.close();
        }
        // Another client: the SDK names a session's link after the session,
        // and an acceptSession right after closing that link on the same
        // connection may be handed the closing link back.
        ServiceBusSessionReceiverClient other = omnibus.broker().client().sessionReceiver().queueName("state")
            .buildClient();
        try (ServiceBusReceiverClient again = other.acceptSession("with-state")) {
            assertArrayEquals("step=2".getBytes(StandardCharsets.UTF_8), again.getSessionState(),
                "state outlives the session receiver");
            again.setSessionState(null);
            assertEquals(null, again.getSessionState(), "state cleared");
        } finally {
            other.close();
        }
    }

    @Test
    void aLockedSessionCannotBeAcceptedTwice() {
        ServiceBusClientBuilder b = omnibus.broker().client();
        try (ServiceBusSenderClient sender = b.sender().queueName("locked").buildClient()) {
            sender.sendMessage(new ServiceBusMessage("x").setSessionId("mine"));
        }
        ServiceBusSessionReceiverClient one = b.sessionReceiver().queueName("locked").buildClient();
        ServiceBusSessionReceiverClient two = omnibus.broker().client().sessionReceiver().queueName("locked")
            .buildClient();
        try (ServiceBusReceiverClient held = one.acceptSession("mine")) {
            // The session acquirer hands the link's error on as it came
            // (ServiceBusSessionAcquirer maps none but the timeout).
            AmqpException e = assertThrows(AmqpException.class, () -> two.acceptSession("mine"));
            assertEquals(AmqpErrorCondition.SESSION_CANNOT_BE_LOCKED, e.getErrorCondition(), e.toString());
            held.complete(Receive.n(held, 1).get(0));
        } finally {
            one.close();
            two.close();
        }
    }

    @Test
    void aSubscriptionWithSessionsHandsOutEachSession() {
        ServiceBusClientBuilder b = omnibus.broker().client();
        try (ServiceBusSenderClient sender = b.sender().topicName("session-topic").buildClient()) {
            sender.sendMessage(new ServiceBusMessage("t1").setSessionId("tenant-1"));
            sender.sendMessage(new ServiceBusMessage("t2").setSessionId("tenant-2"));
            sender.sendMessage(new ServiceBusMessage("t1 again").setSessionId("tenant-1"));
        }
        ServiceBusSessionReceiverClient sessions = b.sessionReceiver().topicName("session-topic")
            .subscriptionName("by-session").buildClient();
        try {
            try (ServiceBusReceiverClient r = sessions.acceptSession("tenant-1")) {
                List<ServiceBusReceivedMessage> got = Receive.n(r, 2);
                assertEquals(List.of("t1", "t1 again"), Receive.bodies(got));
                got.forEach(r::complete);
            }
            try (ServiceBusReceiverClient r = sessions.acceptNextSession()) {
                assertEquals("tenant-2", r.getSessionId());
                r.complete(Receive.n(r, 1).get(0));
            }
        } finally {
            sessions.close();
        }
    }

    @Test
    void theSessionLockIsRenewedPastItsDuration() throws Exception {
        ServiceBusClientBuilder b = omnibus.broker().client();
        try (ServiceBusSenderClient sender = b.sender().queueName("session-renew").buildClient()) {
            sender.sendMessage(new ServiceBusMessage("first").setSessionId("long"));
            sender.sendMessage(new ServiceBusMessage("second").setSessionId("long"));
        }
        ServiceBusSessionReceiverClient sessions = b.sessionReceiver().queueName("session-renew")
            .maxAutoLockRenewDuration(Duration.ofSeconds(30)).buildClient();
        try (ServiceBusReceiverClient r = sessions.acceptSession("long")) {
            r.complete(Receive.n(r, 1).get(0));
            Thread.sleep(7_000); // past the 5 s session lock: only renewals keep it
            List<ServiceBusReceivedMessage> got = Receive.n(r, 1);
            assertEquals(List.of("second"), Receive.bodies(got), "the session is still this receiver's");
            r.complete(got.get(0));
        } finally {
            sessions.close();
        }
    }

    /**
     * When the session lock expires, omnibus detaches the receiver's link with session-lock-lost, as
     * Service Bus does: a completion after that fails, and the message comes back to the session's
     * next holder (amqpserver/README.md, Go, "Session lock lost").
     */
    @Test
    void aCompletionAfterTheSessionLockExpiredFails() throws Exception {
        ServiceBusClientBuilder b = omnibus.broker().client();
        try (ServiceBusSenderClient sender = b.sender().queueName("session-expire").buildClient()) {
            sender.sendMessage(new ServiceBusMessage("once").setSessionId("lapse"));
        }
        ServiceBusSessionReceiverClient sessions = b.sessionReceiver().queueName("session-expire")
            .maxAutoLockRenewDuration(Duration.ZERO).buildClient();
        try {
            try (ServiceBusReceiverClient r = sessions.acceptSession("lapse")) {
                ServiceBusReceivedMessage m = Receive.n(r, 1).get(0);
                Thread.sleep(7_000); // past the 5 s session lock, not renewed
                assertThrows(RuntimeException.class, () -> r.complete(m), "complete after the session lock expired");
            }
            try (ServiceBusReceiverClient again = sessions.acceptSession("lapse")) {
                List<ServiceBusReceivedMessage> got = Receive.n(again, 1);
                assertEquals(List.of("once"), Receive.bodies(got), "the message stays for the next holder");
                again.complete(got.get(0));
            }
        } finally {
            sessions.close();
        }
    }

    @Test
    void sessionProcessorHandlesSessionsConcurrentlyEachInOrder() throws Exception {
        ServiceBusClientBuilder b = omnibus.broker().client();
        int sessions = 3, perSession = 5;
        try (ServiceBusSenderClient sender = b.sender().queueName("processor").buildClient()) {
            List<ServiceBusMessage> msgs = new ArrayList<>();
            for (int i = 0; i < perSession; i++) {
                for (int s = 0; s < sessions; s++) {
                    msgs.add(new ServiceBusMessage(Integer.toString(i)).setSessionId("s" + s));
                }
            }
            sender.sendMessages(msgs);
        }
        Map<String, List<String>> bySession = new ConcurrentHashMap<>();
        List<Throwable> errors = Collections.synchronizedList(new ArrayList<>());
        CountDownLatch done = new CountDownLatch(sessions * perSession);
        ServiceBusProcessorClient processor = b.sessionProcessor().queueName("processor")
            .maxConcurrentSessions(2)
            .sessionIdleTimeout(Duration.ofSeconds(1))
            .processMessage(ctx -> {
                ServiceBusReceivedMessage m = ctx.getMessage();
                bySession.computeIfAbsent(m.getSessionId(), k -> Collections.synchronizedList(new ArrayList<>()))
                    .add(m.getBody().toString());
                done.countDown();
            })
            .processError(ctx -> errors.add(ctx.getException()))
            .buildProcessorClient();
        processor.start();
        try {
            assertTrue(done.await(40, TimeUnit.SECONDS), "processed " + bySession + ", errors " + errors);
            // The processor completes a message after its handler returns:
            // wait for the last completions before closing it.
            assertTrue(Receive.emptied(b, "processor", Duration.ofSeconds(10)), "auto-complete removed every message");
        } finally {
            processor.close();
        }
        assertEquals(sessions, bySession.size(), "every session");
        for (Map.Entry<String, List<String>> e : bySession.entrySet()) {
            assertEquals(List.of("0", "1", "2", "3", "4"), e.getValue(), "session " + e.getKey() + " in order");
        }
    }
}
