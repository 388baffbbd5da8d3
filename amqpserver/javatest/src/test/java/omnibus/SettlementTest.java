package omnibus;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.messaging.servicebus.models.DeadLetterOptions;
import com.azure.messaging.servicebus.models.ServiceBusMessageState;
import com.azure.messaging.servicebus.models.SubQueue;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/** Scheduling and cancelling, defer and receive-deferred, dead-letter and the DLQ subqueue, peek. */
@Timeout(60)
class SettlementTest {
    @RegisterExtension
    static final OmnibusExtension omnibus = new OmnibusExtension(new Entities()
        .queue("schedule")
        .queue("cancel")
        .queue("defer")
        .queue("deadletter")
        .queue("maxdelivery", Map.of("MaxDeliveryCount", 2))
        .queue("peek"));

    @Test
    void scheduledMessageArrivesAtItsTime() {
        ServiceBusClientBuilder b = omnibus.broker().client();
        try (ServiceBusSenderClient sender = b.sender().queueName("schedule").buildClient();
            ServiceBusReceiverClient r = b.receiver().queueName("schedule").buildClient()) {
            OffsetDateTime at = OffsetDateTime.now().plusSeconds(3);
            long seq = sender.scheduleMessage(new ServiceBusMessage("later"), at);
            ServiceBusReceivedMessage peeked = r.peekMessage();
            assertNotNull(peeked, "a scheduled message can be peeked");
            assertEquals(seq, peeked.getSequenceNumber());
            assertEquals(ServiceBusMessageState.SCHEDULED, peeked.getState());
            assertEquals(List.of(), Receive.none(r, Duration.ofSeconds(1)), "not before its time");
            List<ServiceBusReceivedMessage> got = Receive.atMost(r, 1, Duration.ofSeconds(15));
            assertEquals(1, got.size(), "arrives after its time");
            assertTrue(!OffsetDateTime.now().isBefore(at.minusNanos(500_000_000)), "not early");
            assertEquals(seq, got.get(0).getSequenceNumber());
            assertEquals(at.toInstant().getEpochSecond(),
                got.get(0).getScheduledEnqueueTime().toInstant().getEpochSecond());
            r.complete(got.get(0));
        }
    }

    @Test
    void cancelledScheduledMessageNeverArrives() {
        ServiceBusClientBuilder b = omnibus.broker().client();
        try (ServiceBusSenderClient sender = b.sender().queueName("cancel").buildClient();
            ServiceBusReceiverClient r = b.receiver().queueName("cancel").buildClient()) {
            long keep = sender.scheduleMessage(new ServiceBusMessage("keep"), OffsetDateTime.now().plusHours(1));
            long drop = sender.scheduleMessage(new ServiceBusMessage("drop"), OffsetDateTime.now().plusHours(1));
            sender.cancelScheduledMessages(List.of(drop));
            List<Long> left = new ArrayList<>();
            r.peekMessages(10).forEach(m -> left.add(m.getSequenceNumber()));
            assertEquals(List.of(keep), left, "only the uncancelled one is scheduled");
            sender.cancelScheduledMessage(keep);
            assertEquals(null, r.peekMessage());
        }
    }

    @Test
    void deferredMessageIsReceivedBySequenceNumber() {
        ServiceBusClientBuilder b = omnibus.broker().client();
        try (ServiceBusSenderClient sender = b.sender().queueName("defer").buildClient();
            ServiceBusReceiverClient r = b.receiver().queueName("defer").buildClient()) {
            sender.sendMessage(new ServiceBusMessage("later"));
            ServiceBusReceivedMessage m = Receive.n(r, 1).get(0);
            r.defer(m);
            assertEquals(List.of(), Receive.none(r, Duration.ofSeconds(1)), "deferred messages are not received");
            ServiceBusReceivedMessage d = r.receiveDeferredMessage(m.getSequenceNumber());
            assertNotNull(d);
            assertEquals("later", d.getBody().toString());
            assertEquals(ServiceBusMessageState.DEFERRED, d.getState());
            r.complete(d);
            assertEquals(null, r.peekMessage(), "completed");
        }
    }

    @Test
    void deadLetteredMessageGoesToTheDeadLetterSubqueueWithItsReason() {
        ServiceBusClientBuilder b = omnibus.broker().client();
        try (ServiceBusSenderClient sender = b.sender().queueName("deadletter").buildClient();
            ServiceBusReceiverClient r = b.receiver().queueName("deadletter").buildClient();
            ServiceBusReceiverClient dlq = b.receiver().queueName("deadletter").subQueue(SubQueue.DEAD_LETTER_QUEUE)
                .buildClient()) {
            sender.sendMessage(new ServiceBusMessage("poison"));
            ServiceBusReceivedMessage m = Receive.n(r, 1).get(0);
            r.deadLetter(m, new DeadLetterOptions().setDeadLetterReason("bad")
                .setDeadLetterErrorDescription("could not parse")
                .setPropertiesToModify(Map.of("stage", "parse")));
            assertEquals(List.of(), Receive.none(r, Duration.ofSeconds(1)));
            List<ServiceBusReceivedMessage> dead = Receive.n(dlq, 1);
            assertEquals(1, dead.size(), "in the dead-letter subqueue");
            ServiceBusReceivedMessage d = dead.get(0);
            assertEquals("poison", d.getBody().toString());
            assertEquals("bad", d.getDeadLetterReason());
            assertEquals("could not parse", d.getDeadLetterErrorDescription());
            assertEquals("parse", d.getApplicationProperties().get("stage"));
            // Service Bus sets it only on dead letters auto-forwarded to another entity.
            assertEquals(null, d.getDeadLetterSource(), "dead-letter source");
            dlq.complete(d);
            assertEquals(null, dlq.peekMessage());
        }
    }

    @Test
    void messagePastMaxDeliveryCountIsDeadLettered() {
        ServiceBusClientBuilder b = omnibus.broker().client();
        try (ServiceBusSenderClient sender = b.sender().queueName("maxdelivery").buildClient();
            ServiceBusReceiverClient r = b.receiver().queueName("maxdelivery").buildClient();
            ServiceBusReceiverClient dlq = b.receiver().queueName("maxdelivery").subQueue(SubQueue.DEAD_LETTER_QUEUE)
                .buildClient()) {
            sender.sendMessage(new ServiceBusMessage("flaky"));
            for (int i = 0; i < 2; i++) {
                List<ServiceBusReceivedMessage> got = Receive.n(r, 1);
                assertEquals(1, got.size(), "delivery " + (i + 1));
                r.abandon(got.get(0));
            }
            assertEquals(List.of(), Receive.none(r, Duration.ofSeconds(1)));
            ServiceBusReceivedMessage d = Receive.n(dlq, 1).get(0);
            assertEquals("MaxDeliveryCountExceeded", d.getDeadLetterReason());
            dlq.complete(d);
        }
    }

    @Test
    void peekSeesMessagesWithoutLockingThem() {
        ServiceBusClientBuilder b = omnibus.broker().client();
        try (ServiceBusSenderClient sender = b.sender().queueName("peek").buildClient();
            ServiceBusReceiverClient r = b.receiver().queueName("peek").buildClient()) {
            for (int i = 0; i < 5; i++) {
                sender.sendMessage(new ServiceBusMessage("p" + i));
            }
            List<ServiceBusReceivedMessage> all = new ArrayList<>();
            r.peekMessages(5).forEach(all::add);
            assertEquals(List.of("p0", "p1", "p2", "p3", "p4"), Receive.bodies(all));
            assertEquals(null, all.get(0).getLockToken(), "peeked messages carry no lock");
            List<ServiceBusReceivedMessage> from = new ArrayList<>();
            r.peekMessages(2, all.get(3).getSequenceNumber()).forEach(from::add);
            assertEquals(List.of("p3", "p4"), Receive.bodies(from), "peek from a sequence number");
            // Peeking locked nothing: all five can be received.
            List<ServiceBusReceivedMessage> got = Receive.n(r, 5);
            assertEquals(5, got.size());
            for (ServiceBusReceivedMessage m : got) {
                r.complete(m);
            }
        }
    }
}
