package omnibus;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.azure.core.util.BinaryData;
import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.messaging.servicebus.models.ServiceBusReceiveMode;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/** Sender and receiver clients on a queue: peek-lock, receive-and-delete, prefetch. */
@Timeout(60)
class QueueTest {
    @RegisterExtension
    static final OmnibusExtension omnibus = new OmnibusExtension(new Entities()
        .queue("peeklock")
        .queue("abandon")
        .queue("receive-delete")
        .queue("prefetch"));

    @Test
    void peekLockDeliversWhatWasSentAndCompleteRemovesIt() {
        ServiceBusClientBuilder b = omnibus.broker().client();
        try (ServiceBusSenderClient sender = b.sender().queueName("peeklock").buildClient();
            ServiceBusReceiverClient receiver = b.receiver().queueName("peeklock").buildClient()) {
            String id = UUID.randomUUID().toString();
            ServiceBusMessage first = new ServiceBusMessage("first")
                .setMessageId(id)
                .setSubject("greeting")
                .setCorrelationId("corr-1")
                .setContentType("text/plain")
                .setReplyTo("replies")
                .setTimeToLive(Duration.ofMinutes(5));
            first.getApplicationProperties().putAll(Map.of("string", "s", "int", 42, "long", 1L << 40,
                "double", 2.5, "bool", true));
            sender.sendMessage(first);
            sender.sendMessages(List.of(new ServiceBusMessage("second"),
                new ServiceBusMessage(BinaryData.fromBytes(new byte[] {0, 1, 2, (byte) 255}))));

            List<ServiceBusReceivedMessage> got = Receive.n(receiver, 3);
            assertEquals(3, got.size(), "messages received");
            ServiceBusReceivedMessage m = got.get(0);
            assertEquals("first", m.getBody().toString());
            assertEquals(id, m.getMessageId());
            assertEquals("greeting", m.getSubject());
            assertEquals("corr-1", m.getCorrelationId());
            assertEquals("text/plain", m.getContentType());
            assertEquals("replies", m.getReplyTo());
            assertEquals(Duration.ofMinutes(5), m.getTimeToLive());
            assertEquals("s", m.getApplicationProperties().get("string"));
            assertEquals(42, m.getApplicationProperties().get("int"));
            assertEquals(1L << 40, m.getApplicationProperties().get("long"));
            assertEquals(2.5, m.getApplicationProperties().get("double"));
            assertEquals(true, m.getApplicationProperties().get("bool"));
            assertEquals(0, m.getDeliveryCount());
            assertNotNull(m.getLockToken());
            assertTrue(m.getLockedUntil().isAfter(OffsetDateTime.now()), "locked until " + m.getLockedUntil());
            assertTrue(m.getEnqueuedTime().isAfter(OffsetDateTime.now().minusMinutes(1)), "enqueued " + m.getEnqueuedTime());
            assertEquals("second", got.get(1).getBody().toString());
            assertTrue(got.get(1).getSequenceNumber() > m.getSequenceNumber(), "sequence numbers grow");
            assertEquals(List.of((byte) 0, (byte) 1, (byte) 2, (byte) 255),
                List.of(box(got.get(2).getBody().toBytes())));

            for (ServiceBusReceivedMessage r : got) {
                receiver.complete(r);
            }
            assertEquals(List.of(), Receive.none(receiver, Duration.ofSeconds(1)), "completed messages stay gone");
            assertEquals(null, receiver.peekMessage(), "nothing left to peek");
        }
    }

    @Test
    void abandonedMessageComesBackWithItsDeliveryCount() {
        ServiceBusClientBuilder b = omnibus.broker().client();
        try (ServiceBusSenderClient sender = b.sender().queueName("abandon").buildClient();
            ServiceBusReceiverClient receiver = b.receiver().queueName("abandon").buildClient()) {
            sender.sendMessage(new ServiceBusMessage("again"));
            ServiceBusReceivedMessage first = Receive.n(receiver, 1).get(0);
            receiver.abandon(first);
            List<ServiceBusReceivedMessage> again = Receive.n(receiver, 1);
            assertEquals(1, again.size(), "abandoned message redelivered");
            assertEquals(first.getSequenceNumber(), again.get(0).getSequenceNumber());
            assertEquals(1, again.get(0).getDeliveryCount());
            receiver.complete(again.get(0));
        }
    }

    @Test
    void receiveAndDeleteTakesMessagesAway() {
        ServiceBusClientBuilder b = omnibus.broker().client();
        try (ServiceBusSenderClient sender = b.sender().queueName("receive-delete").buildClient();
            ServiceBusReceiverClient receiver = b.receiver().queueName("receive-delete")
                .receiveMode(ServiceBusReceiveMode.RECEIVE_AND_DELETE).buildClient();
            ServiceBusReceiverClient other = b.receiver().queueName("receive-delete").buildClient()) {
            sender.sendMessages(List.of(new ServiceBusMessage("a"), new ServiceBusMessage("b")));
            List<ServiceBusReceivedMessage> got = Receive.n(receiver, 2);
            assertEquals(List.of("a", "b"), Receive.bodies(got));
            assertEquals(null, other.peekMessage(), "nothing left once received");
            assertEquals(List.of(), Receive.none(other, Duration.ofSeconds(1)));
        }
    }

    @Test
    void prefetchedMessagesAreLockedForTheirReceiver() {
        ServiceBusClientBuilder b = omnibus.broker().client();
        try (ServiceBusSenderClient sender = b.sender().queueName("prefetch").buildClient();
            ServiceBusReceiverClient prefetching = b.receiver().queueName("prefetch").prefetchCount(10).buildClient();
            ServiceBusReceiverClient other = b.receiver().queueName("prefetch").buildClient()) {
            for (int i = 0; i < 5; i++) {
                sender.sendMessage(new ServiceBusMessage("p" + i));
            }
            List<ServiceBusReceivedMessage> one = Receive.n(prefetching, 1);
            assertEquals(List.of("p0"), Receive.bodies(one));
            // The other four went to the prefetching link's buffer, locked
            // for it: another receiver gets none of them.
            assertEquals(List.of(), Receive.none(other, Duration.ofSeconds(2)), "prefetched messages are locked");
            List<ServiceBusReceivedMessage> rest = Receive.atMost(prefetching, 4, Duration.ofSeconds(5));
            assertEquals(List.of("p1", "p2", "p3", "p4"), Receive.bodies(rest));
            for (ServiceBusReceivedMessage m : one) {
                prefetching.complete(m);
            }
            for (ServiceBusReceivedMessage m : rest) {
                prefetching.complete(m);
            }
        }
    }

    private static Byte[] box(byte[] b) {
        Byte[] out = new Byte[b.length];
        for (int i = 0; i < b.length; i++) {
            out[i] = b[i];
        }
        return out;
    }
}
