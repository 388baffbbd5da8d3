package omnibus;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.azure.core.amqp.models.AmqpAnnotatedMessage;
import com.azure.core.amqp.models.AmqpMessageBody;
import com.azure.core.amqp.models.AmqpMessageBodyType;
import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.messaging.servicebus.models.ServiceBusReceiveMode;
import com.azure.messaging.servicebus.models.SubQueue;
import java.time.Duration;
import java.util.Date;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/** What a message carries and what the broker does with it: AMQP body kinds, property types, duplicates, expiry. */
@Timeout(60)
class MessageTest {
    @RegisterExtension
    static final OmnibusExtension omnibus = new OmnibusExtension(new Entities()
        .queue("bodies")
        .queue("dedup", Map.of("RequiresDuplicateDetection", true, "DuplicateDetectionHistoryTimeWindow", "PT1M"))
        .queue("expiry", Map.of("DeadLetteringOnMessageExpiration", true)));

    @Test
    void valueAndSequenceBodiesAndPropertyTypesArriveAsSent() {
        ServiceBusClientBuilder b = omnibus.broker().client();
        try (ServiceBusSenderClient sender = b.sender().queueName("bodies").buildClient();
            ServiceBusReceiverClient r = b.receiver().queueName("bodies")
                .receiveMode(ServiceBusReceiveMode.RECEIVE_AND_DELETE).buildClient()) {
            UUID id = UUID.randomUUID();
            Date when = new Date(1_700_000_000_123L);
            ServiceBusMessage value = new ServiceBusMessage(AmqpMessageBody.fromValue("an amqp-value string"));
            value.getApplicationProperties().putAll(Map.of("uuid", id, "when", when, "short", (short) 7,
                "float", 1.5f, "byte", (byte) -3));
            sender.sendMessage(value);
            sender.sendMessage(new ServiceBusMessage(AmqpMessageBody.fromSequence(List.of("a", 1L, true))));
            List<ServiceBusReceivedMessage> got = Receive.n(r, 2);
            assertEquals(2, got.size());

            AmqpAnnotatedMessage v = got.get(0).getRawAmqpMessage();
            assertEquals(AmqpMessageBodyType.VALUE, v.getBody().getBodyType());
            assertEquals("an amqp-value string", v.getBody().getValue());
            Map<String, Object> p = got.get(0).getApplicationProperties();
            assertEquals(id, p.get("uuid"));
            assertEquals(when, p.get("when"));
            assertEquals((short) 7, p.get("short"));
            assertEquals(1.5f, p.get("float"));
            assertEquals((byte) -3, p.get("byte"));

            AmqpAnnotatedMessage s = got.get(1).getRawAmqpMessage();
            assertEquals(AmqpMessageBodyType.SEQUENCE, s.getBody().getBodyType());
            assertEquals(List.of("a", 1L, true), s.getBody().getSequence());
        }
    }

    @Test
    void duplicateMessageIdsAreDroppedWithinTheWindow() {
        ServiceBusClientBuilder b = omnibus.broker().client();
        try (ServiceBusSenderClient sender = b.sender().queueName("dedup").buildClient();
            ServiceBusReceiverClient r = b.receiver().queueName("dedup")
                .receiveMode(ServiceBusReceiveMode.RECEIVE_AND_DELETE).buildClient()) {
            sender.sendMessage(new ServiceBusMessage("first").setMessageId("order-1"));
            sender.sendMessage(new ServiceBusMessage("again").setMessageId("order-1"));
            sender.sendMessage(new ServiceBusMessage("other").setMessageId("order-2"));
            List<ServiceBusReceivedMessage> got = Receive.atMost(r, 3, Duration.ofSeconds(3));
            assertEquals(List.of("first", "other"), Receive.bodies(got), "the second order-1 was a duplicate");
        }
    }

    @Test
    void anExpiredMessageIsDeadLettered() throws Exception {
        ServiceBusClientBuilder b = omnibus.broker().client();
        try (ServiceBusSenderClient sender = b.sender().queueName("expiry").buildClient();
            ServiceBusReceiverClient r = b.receiver().queueName("expiry").buildClient();
            ServiceBusReceiverClient dlq = b.receiver().queueName("expiry").subQueue(SubQueue.DEAD_LETTER_QUEUE)
                .buildClient()) {
            sender.sendMessage(new ServiceBusMessage("short-lived").setTimeToLive(Duration.ofSeconds(1)));
            Thread.sleep(1_500);
            assertEquals(List.of(), Receive.none(r, Duration.ofMillis(500)), "expired messages are not delivered");
            List<ServiceBusReceivedMessage> dead = Receive.n(dlq, 1);
            assertEquals(List.of("short-lived"), Receive.bodies(dead));
            assertEquals("TTLExpiredException", dead.get(0).getDeadLetterReason());
            assertTrue(dead.get(0).getExpiresAt() != null);
            dlq.complete(dead.get(0));
        }
    }
}
