package omnibus;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.azure.core.amqp.AmqpTransportType;
import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import java.time.Duration;
import java.util.List;
import omnibus.child.SendOnce;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The ways Java connects, each sending and receiving: the emulator's
 * connection string (plain AMQP on the endpoint's port), the ordinary one
 * (AMQPS, the CA trusted), AMQP over WebSockets (wss on the HTTPS port),
 * and either of the last two reached through customEndpointAddress while
 * the connection string names another host.
 */
@Timeout(60)
class ConnectTest {
    @RegisterExtension
    static final OmnibusExtension omnibus = new OmnibusExtension(new Entities()
        .queue("emulator")
        .queue("amqps")
        .queue("amqps-custom")
        .queue("wss")
        .queue("wss-custom")
        .queue("untrusted"));

    @Test
    void emulatorConnectionString() {
        // UseDevelopmentEmulator=true: plain AMQP, the endpoint's port (7.17.8 on).
        roundTrip(omnibus.broker().client(), "emulator");
    }

    @Test
    void ordinaryConnectionStringOverAmqps() {
        Broker b = omnibus.broker();
        roundTrip(new ServiceBusClientBuilder().connectionString(b.tlsConnectionString(b.amqpsPort))
            .retryOptions(Broker.RETRY), "amqps");
    }

    @Test
    void amqpsThroughCustomEndpointAddress() {
        Broker b = omnibus.broker();
        // The namespace is "localhost" (the token's audience, the open's
        // hostname); the socket goes to the custom address, whose host
        // the certificate must name.
        roundTrip(new ServiceBusClientBuilder()
            .connectionString("Endpoint=sb://localhost/;SharedAccessKeyName=" + Broker.KEY_NAME
                + ";SharedAccessKey=" + Broker.KEY)
            .customEndpointAddress("https://" + b.host + ":" + b.amqpsPort)
            .retryOptions(Broker.RETRY), "amqps-custom");
    }

    @Test
    void webSocketsOnTheHttpsPort() {
        Broker b = omnibus.broker();
        roundTrip(new ServiceBusClientBuilder().connectionString(b.tlsConnectionString(b.httpsPort))
            .transportType(AmqpTransportType.AMQP_WEB_SOCKETS)
            .retryOptions(Broker.RETRY), "wss");
    }

    @Test
    void webSocketsThroughCustomEndpointAddress() {
        Broker b = omnibus.broker();
        roundTrip(new ServiceBusClientBuilder()
            .connectionString("Endpoint=sb://localhost/;SharedAccessKeyName=" + Broker.KEY_NAME
                + ";SharedAccessKey=" + Broker.KEY)
            .customEndpointAddress("https://" + b.host + ":" + b.httpsPort)
            .transportType(AmqpTransportType.AMQP_WEB_SOCKETS)
            .retryOptions(Broker.RETRY), "wss-custom");
    }

    @Test
    void aJvmThatDoesNotTrustTheCaIsRefusedAndOneThatDoesConnects() throws Exception {
        // A JVM of its own: the trust store is read once per JVM.
        Broker b = omnibus.broker();
        String cs = b.tlsConnectionString(b.amqpsPort);
        try (ChildJvm untrusting = ChildJvm.start(false, SendOnce.class, cs, "untrusted")) {
            // The SDK reports a timeout; proton-j logs why (JUL, stderr).
            untrusting.await("failed", Duration.ofSeconds(40));
            assertTrue(untrusting.output().contains("PKIX path building failed"),
                "without the CA the TLS handshake fails on the certificate: " + untrusting.output());
        }
        try (ChildJvm trusting = ChildJvm.start(true, SendOnce.class, cs, "untrusted")) {
            trusting.await("sent", Duration.ofSeconds(40));
        }
        try (ServiceBusReceiverClient r = b.client().receiver().queueName("untrusted").buildClient()) {
            assertEquals(List.of("from a child JVM"), Receive.bodies(Receive.n(r, 1)), "only the trusting JVM's");
        }
    }

    /** Sends, receives and completes one message, then checks the queue is empty. */
    static void roundTrip(ServiceBusClientBuilder b, String queue) {
        try (ServiceBusSenderClient sender = b.sender().queueName(queue).buildClient();
            ServiceBusReceiverClient r = b.receiver().queueName(queue).buildClient()) {
            sender.sendMessage(new ServiceBusMessage("over " + queue));
            List<ServiceBusReceivedMessage> got = Receive.n(r, 1);
            assertEquals(List.of("over " + queue), Receive.bodies(got));
            r.complete(got.get(0));
            assertEquals(null, r.peekMessage());
        }
    }
}
