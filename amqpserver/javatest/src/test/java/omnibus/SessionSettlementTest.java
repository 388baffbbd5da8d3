package omnibus;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.messaging.servicebus.ServiceBusSessionReceiverClient;
import com.azure.messaging.servicebus.models.DeadLetterOptions;
import com.azure.messaging.servicebus.models.SubQueue;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/** Peek, defer, dead-letter and scheduling within message sessions, and the system properties a session message carries. */
@Timeout(60)
class SessionSettlementTest {
    private static final Map<String, Object> SESSIONS = Map.of("RequiresSession", true);

    @RegisterExtension
    static final OmnibusExtension omnibus = new OmnibusExtension(new Entities()
        .queue("in-session", SESSIONS)
        .queue("scheduled-session", SESSIONS));

    @Test
    void peekDeferAndDeadLetterStayWithinTheSession() {
        ServiceBusClientBuilder b = omnibus.broker().client();
        try (ServiceBusSenderClient sender = b.sender().queueName("in-session").buildClient()) {
            sender.sendMessage(new ServiceBusMessage("other session").setSessionId("other"));
            for (String body : List.of("keep", "later", "bad")) {
                sender.sendMessage(new ServiceBusMessage(body).setSessionId("mine").setReplyToSessionId("replies")
                    .setTo("somewhere").setPartitionKey("mine"));
            }
        }
        ServiceBusSessionReceiverClient sessions = b.sessionReceiver().queueName("in-session").buildClient();
        try (ServiceBusReceiverClient r = sessions.acceptSession("mine")) {
            List<String> peeked = new ArrayList<>();
            r.peekMessages(10).forEach(m -> peeked.add(m.getBody().toString()));
            assertEquals(List.of("keep", "later", "bad"), peeked, "a session receiver peeks its session only");

            List<ServiceBusReceivedMessage> got = Receive.n(r, 3);
            assertEquals(List.of("keep", "later", "bad"), Receive.bodies(got));
            ServiceBusReceivedMessage keep = got.get(0);
            assertEquals("mine", keep.getSessionId());
            assertEquals("replies", keep.getReplyToSessionId());
            assertEquals("somewhere", keep.getTo());
            assertEquals("mine", keep.getPartitionKey());
            r.complete(keep);
            r.defer(got.get(1));
            r.deadLetter(got.get(2), new DeadLetterOptions().setDeadLetterReason("no good"));

            ServiceBusReceivedMessage later = r.receiveDeferredMessage(got.get(1).getSequenceNumber());
            assertNotNull(later, "a deferred session message, by sequence number");
            assertEquals("later", later.getBody().toString());
            r.complete(later);
        } finally {
            sessions.close();
        }
        try (ServiceBusReceiverClient dlq = b.receiver().queueName("in-session").subQueue(SubQueue.DEAD_LETTER_QUEUE)
            .buildClient()) {
            ServiceBusReceivedMessage dead = Receive.n(dlq, 1).get(0);
            assertEquals("bad", dead.getBody().toString());
            assertEquals("mine", dead.getSessionId(), "a dead letter keeps its session id");
            assertEquals("no good", dead.getDeadLetterReason());
            dlq.complete(dead);
        }
    }

    @Test
    void scheduledSessionMessagesArriveInTheirSessionAtTheirTime() {
        ServiceBusClientBuilder b = omnibus.broker().client();
        OffsetDateTime at = OffsetDateTime.now().plusSeconds(2);
        try (ServiceBusSenderClient sender = b.sender().queueName("scheduled-session").buildClient()) {
            List<Long> seqs = new ArrayList<>();
            sender.scheduleMessages(List.of(new ServiceBusMessage("one").setSessionId("timed"),
                new ServiceBusMessage("two").setSessionId("timed")), at).forEach(seqs::add);
            assertEquals(2, seqs.size(), "a sequence number per scheduled message");
            // A message may also carry its own time.
            sender.sendMessage(new ServiceBusMessage("three").setSessionId("timed").setScheduledEnqueueTime(at));
        }
        ServiceBusSessionReceiverClient sessions = b.sessionReceiver().queueName("scheduled-session").buildClient();
        try (ServiceBusReceiverClient r = sessions.acceptSession("timed")) {
            List<ServiceBusReceivedMessage> got = Receive.atMost(r, 3, Duration.ofSeconds(15));
            assertTrue(!OffsetDateTime.now().isBefore(at.minusNanos(500_000_000)), "not before their time");
            assertEquals(List.of("one", "two", "three"), Receive.bodies(got));
            got.forEach(r::complete);
        } finally {
            sessions.close();
        }
    }
}
