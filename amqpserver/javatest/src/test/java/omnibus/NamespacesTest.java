package omnibus;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusException;
import com.azure.messaging.servicebus.ServiceBusFailureReason;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.messaging.servicebus.models.ServiceBusReceiveMode;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Namespaces of one omnibus through the Java SDK (issue 27): two
 * namespaces besides the default one, reached by the SAS key name
 * ("sender@north") or by host name through customEndpointAddress; each
 * keeps its messages, and each rule does only what its rights allow.
 */
@Timeout(60)
class NamespacesTest {
    // 44-character keys, as Service Bus makes them.
    static final String SEND_KEY = "amF2YS1zZW5kLWphdmEtc2VuZC1qYXZhLXNlbmQtamE=";
    static final String LISTEN_KEY = "amF2YS1saXN0ZW4tamF2YS1saXN0ZW4tamF2YS1saXM=";

    @RegisterExtension
    static final OmnibusExtension omnibus = new OmnibusExtension(new Entities()
        .queue("orders")
        .namespace("north", List.of(Entities.rule("sender", SEND_KEY, "Send"), Entities.rule("reader", LISTEN_KEY, "Listen")),
            "orders", "by-host")
        .namespace("south", List.of(), "orders"));

    /** A client on the broker's address whose key name picks the namespace. */
    private static ServiceBusClientBuilder byKeyName(String keyName, String key) {
        Broker b = omnibus.broker();
        return new ServiceBusClientBuilder().retryOptions(Broker.RETRY).connectionString(
            "Endpoint=sb://" + b.host + ":" + b.amqpPort + ";SharedAccessKeyName=" + keyName + ";SharedAccessKey=" + key
                + ";UseDevelopmentEmulator=true");
    }

    private static List<ServiceBusReceivedMessage> peek(ServiceBusClientBuilder c, String queue) {
        try (ServiceBusReceiverClient r = c.receiver().queueName(queue).buildClient()) {
            return r.peekMessages(10).stream().toList();
        }
    }

    @Test
    void eachNamespaceKeepsItsMessages() {
        try (ServiceBusSenderClient s = byKeyName("sender@north", SEND_KEY).sender().queueName("orders").buildClient()) {
            s.sendMessage(new ServiceBusMessage("to north"));
        }
        try (ServiceBusSenderClient s = byKeyName("RootManageSharedAccessKey@south", Broker.KEY).sender().queueName("orders").buildClient()) {
            s.sendMessage(new ServiceBusMessage("to south"));
        }
        try (ServiceBusReceiverClient r = byKeyName("reader@north", LISTEN_KEY).receiver().queueName("orders")
            .receiveMode(ServiceBusReceiveMode.RECEIVE_AND_DELETE).buildClient()) {
            List<ServiceBusReceivedMessage> got = Receive.n(r, 1);
            assertEquals(1, got.size(), "north's message");
            assertEquals("to north", got.get(0).getBody().toString());
        }
        List<ServiceBusReceivedMessage> south = peek(byKeyName("south", Broker.KEY), "orders");
        assertEquals(1, south.size(), "south holds its own message only");
        assertEquals("to south", south.get(0).getBody().toString());
        assertEquals(0, peek(omnibus.broker().client(), "orders").size(), "the default namespace's queue stays empty");
    }

    @Test
    void eachRuleDoesOnlyWhatItsRightsAllow() {
        ServiceBusException e = assertThrows(ServiceBusException.class,
            () -> peek(byKeyName("sender@north", SEND_KEY), "orders"), "a Send rule peeking");
        assertEquals(ServiceBusFailureReason.UNAUTHORIZED, e.getReason(), e.toString());
        assertTrue(e.getMessage().contains("'Listen' claim(s) are required"), e.getMessage());
        try (ServiceBusSenderClient s = byKeyName("reader@north", LISTEN_KEY).sender().queueName("orders").buildClient()) {
            ServiceBusException se = assertThrows(ServiceBusException.class, () -> s.sendMessage(new ServiceBusMessage("no")),
                "a Listen rule sending");
            assertEquals(ServiceBusFailureReason.UNAUTHORIZED, se.getReason(), se.toString());
        }
        // north has rules of its own: the root key does not reach it.
        ServiceBusException root = assertThrows(ServiceBusException.class,
            () -> peek(byKeyName("RootManageSharedAccessKey@north", Broker.KEY), "orders"), "the root key on north");
        assertEquals(ServiceBusFailureReason.UNAUTHORIZED, root.getReason(), root.toString());
    }

    @Test
    void aNamespaceIsReachedByHostNameThroughCustomEndpointAddress() {
        Broker b = omnibus.broker();
        ServiceBusClientBuilder c = new ServiceBusClientBuilder().retryOptions(Broker.RETRY)
            .connectionString("Endpoint=sb://north.localhost:" + b.amqpPort + ";SharedAccessKeyName=sender;SharedAccessKey="
                + SEND_KEY + ";UseDevelopmentEmulator=true")
            // java.net.URL parses it, so the scheme must be one it knows; the
            // SDK takes the host and port.
            .customEndpointAddress("https://" + b.host + ":" + b.amqpPort);
        try (ServiceBusSenderClient s = c.sender().queueName("by-host").buildClient()) {
            s.sendMessage(new ServiceBusMessage("by host"));
        }
        List<ServiceBusReceivedMessage> got = peek(byKeyName("reader@north", LISTEN_KEY), "by-host");
        assertEquals(1, got.size(), "north's by-host queue");
        assertEquals("by host", got.get(0).getBody().toString());
    }
}
