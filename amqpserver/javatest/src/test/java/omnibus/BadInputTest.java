package omnibus;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.azure.core.amqp.AmqpRetryOptions;
import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.messaging.servicebus.models.ServiceBusReceiveMode;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLSocket;
import omnibus.child.HoldingProcessor;
import omnibus.child.OpenTransaction;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Bad input from Java clients (issue 26): clients that tear down in the
 * middle of each handshake, a processor whose JVM is killed while it holds
 * locks, a transaction left open when its JVM exits. The broker recovers
 * every lock, loses nothing, and keeps serving everyone else.
 */
@Timeout(90)
class BadInputTest {
    @RegisterExtension
    static final OmnibusExtension omnibus = new OmnibusExtension(new Entities()
        .queue("held", Map.of("LockDuration", "PT5S"))
        .queue("txn-exit", Map.of("LockDuration", "PT5S"))
        .queue("bystander"));

    @Test
    void processorKilledWhileHoldingLocksLosesNothing() throws Exception {
        Broker b = omnibus.broker();
        int total = 10, holding = 4;
        try (ServiceBusSenderClient sender = b.client().sender().queueName("held").buildClient()) {
            List<ServiceBusMessage> msgs = new ArrayList<>();
            for (int i = 0; i < total; i++) {
                msgs.add(new ServiceBusMessage("m" + i));
            }
            sender.sendMessages(msgs);
        }
        Set<String> held = new HashSet<>();
        try (ChildJvm child = ChildJvm.start(HoldingProcessor.class, b.connectionString(), "held",
            Integer.toString(holding))) {
            for (int i = 0; i < holding; i++) {
                held.add(child.await("holding ", Duration.ofSeconds(40)).substring("holding ".length()));
            }
            child.kill(); // SIGKILL: no close, no detach, the locks held
        }
        assertEquals(holding, held.size(), "distinct messages held by the killed processor");
        ServiceBusClientBuilder c = b.client();
        try (ServiceBusReceiverClient r = c.receiver().queueName("held").buildClient()) {
            // The unlocked ones at once, the held ones when their 5 s locks end.
            List<ServiceBusReceivedMessage> got = Receive.atMost(r, total, Duration.ofSeconds(30));
            Map<String, Long> counts = new TreeMap<>();
            for (ServiceBusReceivedMessage m : got) {
                counts.put(m.getBody().toString(), m.getDeliveryCount());
                r.complete(m);
            }
            assertEquals(total, got.size(), "every message back, once: " + counts);
            assertEquals(total, counts.size(), "no duplicates: " + counts);
            for (String h : held) {
                assertTrue(counts.getOrDefault(h, 0L) >= 1, h + " was delivered before: " + counts);
            }
            assertEquals(null, r.peekMessage(), "all completed");
        }
    }

    @Test
    void transactionLeftOpenWhenTheJvmExitsIsRolledBack() throws Exception {
        Broker b = omnibus.broker();
        ServiceBusClientBuilder c = b.client();
        try (ServiceBusSenderClient sender = c.sender().queueName("txn-exit").buildClient()) {
            sender.sendMessage(new ServiceBusMessage("input"));
        }
        try (ChildJvm child = ChildJvm.start(OpenTransaction.class, b.connectionString(), "txn-exit")) {
            assertEquals("open input", child.await("open ", Duration.ofSeconds(40)));
            assertEquals(0, child.waitFor(Duration.ofSeconds(20)), child.output());
        }
        try (ServiceBusReceiverClient r = c.receiver().queueName("txn-exit").buildClient()) {
            List<String> peeked = new ArrayList<>();
            r.peekMessages(10).forEach(m -> peeked.add(m.getBody().toString()));
            assertEquals(List.of("input"), peeked, "the transaction's send was never stored");
            List<ServiceBusReceivedMessage> again = Receive.atMost(r, 1, Duration.ofSeconds(20));
            assertEquals(List.of("input"), Receive.bodies(again), "its completion rolled back: the input is back");
            assertEquals(1, again.get(0).getDeliveryCount());
            r.complete(again.get(0));
            assertEquals(List.of(), Receive.none(r, Duration.ofSeconds(1)), "and nothing else");
        }
    }

    @Test
    void clientsThatTearDownMidHandshakeCostNothing() throws Exception {
        Broker b = omnibus.broker();
        ServiceBusClientBuilder c = b.client();
        try (ServiceBusSenderClient sender = c.sender().queueName("bystander").buildClient();
            ServiceBusReceiverClient r = c.receiver().queueName("bystander")
                .receiveMode(ServiceBusReceiveMode.RECEIVE_AND_DELETE).buildClient()) {
            sender.sendMessage(new ServiceBusMessage("before"));
            assertEquals(List.of("before"), Receive.bodies(Receive.n(r, 1)));
            double goroutines = b.metric("go_goroutines"), fds = b.metric("process_open_fds");

            for (int round = 0; round < 5; round++) {
                tearDownMidHandshakes(b);
                sender.sendMessage(new ServiceBusMessage("during " + round));
                assertEquals(List.of("during " + round), Receive.bodies(Receive.n(r, 1)), "a connected client goes on");
            }
            assertTrue(b.isAlive(), "the broker is running");
            // Everything those sockets made the broker hold is given back.
            long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
            double g, f;
            do {
                Thread.sleep(200);
                g = b.metric("go_goroutines");
                f = b.metric("process_open_fds");
            } while ((g > goroutines + 3 || f > fds + 3) && System.nanoTime() < deadline);
            assertTrue(g <= goroutines + 3, "goroutines " + goroutines + " before, " + g + " after");
            assertTrue(f <= fds + 3, "open files " + fds + " before, " + f + " after");
            sender.sendMessage(new ServiceBusMessage("after"));
            assertEquals(List.of("after"), Receive.bodies(Receive.n(r, 1)));
        }
    }

    @Test
    void anSdkClientCutOffMidHandshakeConnectsAgainAndSends() throws Exception {
        Broker b = omnibus.broker();
        // The first connection ends in the middle of the client's
        // sasl-init (a retry costs the SDK 4 s and more, so just one).
        try (CuttingProxy proxy = new CuttingProxy(b.host, b.amqpPort, 30)) {
            String cs = "Endpoint=sb://127.0.0.1:" + proxy.port() + ";SharedAccessKeyName=" + Broker.KEY_NAME
                + ";SharedAccessKey=" + Broker.KEY + ";UseDevelopmentEmulator=true";
            ServiceBusClientBuilder c = new ServiceBusClientBuilder().connectionString(cs)
                .retryOptions(new AmqpRetryOptions().setMaxRetries(3).setDelay(Duration.ofMillis(100))
                    .setMaxDelay(Duration.ofSeconds(5)).setTryTimeout(Duration.ofSeconds(10)));
            try (ServiceBusSenderClient sender = c.sender().queueName("bystander").buildClient()) {
                sender.sendMessage(new ServiceBusMessage("through the cuts"));
            }
            assertTrue(proxy.accepted() > 1, "the SDK connected " + proxy.accepted() + " times");
        }
        try (ServiceBusReceiverClient r = b.client().receiver().queueName("bystander")
            .receiveMode(ServiceBusReceiveMode.RECEIVE_AND_DELETE).buildClient()) {
            assertEquals(List.of("through the cuts"), Receive.bodies(Receive.atMost(r, 2, Duration.ofSeconds(3))),
                "sent once");
        }
    }

    private static final byte[] SASL_HEADER = {'A', 'M', 'Q', 'P', 3, 1, 0, 0};
    private static final byte[] AMQP_HEADER = {'A', 'M', 'Q', 'P', 0, 1, 0, 0};
    /** A sasl-init frame choosing ANONYMOUS. */
    private static final byte[] SASL_INIT_ANONYMOUS = {
        0, 0, 0, 25, 2, 1, 0, 0, // frame header: size 25, doff 2, SASL frame, channel 0
        0, 0x53, 0x41, // descriptor: sasl-init
        (byte) 0xc0, 12, 1, (byte) 0xa3, 9, 'A', 'N', 'O', 'N', 'Y', 'M', 'O', 'U', 'S'};

    /** One client for each stage of each handshake, each closing its socket there. */
    private static void tearDownMidHandshakes(Broker b) throws Exception {
        // AMQP: a bare connect, half a protocol header, a header, half a
        // sasl-init, then SASL done and half an open.
        raw(b.host, b.amqpPort, (in, out) -> {
        });
        raw(b.host, b.amqpPort, (in, out) -> out.write(SASL_HEADER, 0, 5));
        raw(b.host, b.amqpPort, (in, out) -> out.write(SASL_HEADER));
        raw(b.host, b.amqpPort, (in, out) -> {
            out.write(SASL_HEADER);
            readSome(in);
            out.write(SASL_INIT_ANONYMOUS, 0, 14);
        });
        raw(b.host, b.amqpPort, (in, out) -> {
            out.write(SASL_HEADER);
            readSome(in);
            out.write(SASL_INIT_ANONYMOUS);
            readSome(in);
            out.write(AMQP_HEADER);
            readSome(in);
            out.write(new byte[] {0, 0, 1, 0, 2, 0, 0, 0, 0, 0x53, 0x10}); // an open frame that stops early
        });
        // AMQPS: half a TLS ClientHello; a finished TLS handshake, then
        // half an AMQP header.
        raw(b.host, b.amqpsPort, (in, out) -> out.write(new byte[] {0x16, 3, 1, 2, 0, 1, 0, 1, (byte) 0xfc, 3, 3}));
        tls(b.host, b.amqpsPort, (in, out) -> out.write(SASL_HEADER, 0, 3));
        // WebSockets: an upgrade request cut off, on HTTP and on HTTPS.
        byte[] upgrade = ("GET /$servicebus/websocket HTTP/1.1\r\nHost: " + b.host + "\r\nUpgrade: websocket\r\n")
            .getBytes(StandardCharsets.US_ASCII);
        raw(b.host, b.httpPort, (in, out) -> out.write(upgrade));
        tls(b.host, b.httpsPort, (in, out) -> out.write(upgrade));
    }

    private interface Conversation {
        void run(InputStream in, OutputStream out) throws IOException;
    }

    private static void raw(String host, int port, Conversation c) throws IOException {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(host, port), 5000);
            s.setSoTimeout(2000);
            c.run(s.getInputStream(), s.getOutputStream());
            s.getOutputStream().flush();
        }
    }

    private static void tls(String host, int port, Conversation c) throws Exception {
        SSLContext ctx = SSLContext.getDefault(); // trusts omnibus's CA (see Run)
        try (SSLSocket s = (SSLSocket) ctx.getSocketFactory().createSocket(host, port)) {
            s.setSoTimeout(2000);
            s.startHandshake();
            c.run(s.getInputStream(), s.getOutputStream());
            s.getOutputStream().flush();
        }
    }

    /** Reads what the server sent so far (at least one byte, within 2 s). */
    private static void readSome(InputStream in) throws IOException {
        byte[] buf = new byte[4096];
        if (in.read(buf) < 0) {
            throw new IOException("the server closed the connection");
        }
    }
}
