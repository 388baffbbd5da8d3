package omnibus;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusException;
import com.azure.messaging.servicebus.ServiceBusFailureReason;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusMessageBatch;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.messaging.servicebus.models.ServiceBusReceiveMode;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * createMessageBatch sized by what the broker's attach says: the entity's
 * maximum message size (max-message-size, and
 * com.microsoft:max-message-batch-size, at most 1 MB).
 */
@Timeout(60)
class BatchTest {
    @RegisterExtension
    static final OmnibusExtension omnibus = new OmnibusExtension(new Entities()
        .queue("batch")
        .queue("big", Map.of("MaxMessageSizeInKilobytes", 1024))
        .queue("too-big"));

    @Test
    void aFullBatchIsSentWholeAndEveryMessageArrives() {
        ServiceBusClientBuilder b = omnibus.broker().client();
        try (ServiceBusSenderClient sender = b.sender().queueName("batch").buildClient();
            ServiceBusReceiverClient r = b.receiver().queueName("batch")
                .receiveMode(ServiceBusReceiveMode.RECEIVE_AND_DELETE).buildClient()) {
            ServiceBusMessageBatch batch = sender.createMessageBatch();
            assertEquals(256 * 1024, batch.getMaxSizeInBytes(), "the entity's 256 KiB maximum");
            byte[] kib = new byte[1024];
            int n = 0;
            while (batch.tryAddMessage(new ServiceBusMessage(kib).setMessageId(Integer.toString(n)))) {
                n++;
            }
            assertTrue(n > 200, "a 256 KiB batch holds " + n + " messages of 1 KiB");
            sender.sendMessages(batch);
            List<ServiceBusReceivedMessage> got = Receive.atMost(r, n, Duration.ofSeconds(20));
            assertEquals(n, got.size(), "every message of the batch");
            for (int i = 0; i < n; i++) {
                assertEquals(Integer.toString(i), got.get(i).getMessageId(), "in order");
                assertEquals(1024, got.get(i).getBody().toBytes().length);
            }
        }
    }

    @Test
    void batchSizeFollowsTheEntitysMaximumMessageSize() {
        ServiceBusClientBuilder b = omnibus.broker().client();
        try (ServiceBusSenderClient sender = b.sender().queueName("big").buildClient();
            ServiceBusReceiverClient r = b.receiver().queueName("big")
                .receiveMode(ServiceBusReceiveMode.RECEIVE_AND_DELETE).buildClient()) {
            assertEquals(1024 * 1024, sender.createMessageBatch().getMaxSizeInBytes(), "1 MiB entity");
            sender.sendMessage(new ServiceBusMessage(new byte[600 * 1024]));
            List<ServiceBusReceivedMessage> got = Receive.n(r, 1);
            assertEquals(600 * 1024, got.get(0).getBody().toBytes().length, "a 600 KiB message");
        }
    }

    @Test
    void anOversizedMessageIsRefusedAndTheSenderGoesOn() {
        ServiceBusClientBuilder b = omnibus.broker().client();
        try (ServiceBusSenderClient sender = b.sender().queueName("too-big").buildClient();
            ServiceBusReceiverClient r = b.receiver().queueName("too-big")
                .receiveMode(ServiceBusReceiveMode.RECEIVE_AND_DELETE).buildClient()) {
            // The SDK checks the size against the link's max-message-size.
            ServiceBusException e = assertThrows(ServiceBusException.class,
                () -> sender.sendMessage(new ServiceBusMessage(new byte[300 * 1024])));
            assertEquals(ServiceBusFailureReason.MESSAGE_SIZE_EXCEEDED, e.getReason(), e.toString());
            sender.sendMessage(new ServiceBusMessage("small"));
            assertEquals(List.of("small"), Receive.bodies(Receive.n(r, 1)));
        }
    }
}
