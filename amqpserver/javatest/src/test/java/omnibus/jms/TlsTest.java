package omnibus.jms;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.CertificateFactory;
import javax.jms.JMSContext;
import javax.jms.JMSRuntimeException;
import javax.jms.Queue;
import javax.jms.TextMessage;

import omnibus.Broker;
import omnibus.Entities;
import omnibus.OmnibusExtension;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;

/** Qpid JMS over AMQPS, trusting omnibus's CA through a trust store of its own (transport.trustStoreLocation). */
@Timeout(60)
class TlsTest {
    @RegisterExtension
    static final OmnibusExtension omnibus = new OmnibusExtension(new Entities().queue("jms-tls"));

    @Test
    void amqpsWithOmnibusCA(@TempDir Path dir) throws Exception {
        Broker b = omnibus.broker();
        Path store = dir.resolve("omnibus.p12");
        KeyStore ks = KeyStore.getInstance("PKCS12");
        ks.load(null, null);
        try (InputStream in = Files.newInputStream(b.caPath)) {
            ks.setCertificateEntry("omnibus", CertificateFactory.getInstance("X.509").generateCertificate(in));
        }
        try (var out = Files.newOutputStream(store)) {
            ks.store(out, "changeit".toCharArray());
        }
        String uri = "amqps://" + b.host + ":" + b.amqpsPort + "?transport.trustStoreLocation=" + store
            + "&transport.trustStorePassword=changeit&transport.trustStoreType=PKCS12&transport.verifyHost=true";
        try (JMSContext ctx = Jms.factory(uri).createContext()) {
            Queue q = ctx.createQueue("jms-tls");
            ctx.createProducer().send(q, "over TLS");
            assertEquals("over TLS", ((TextMessage) ctx.createConsumer(q).receive(10_000)).getText());
        }
        // Without the CA the certificate is refused.
        String untrusting = "amqps://" + b.host + ":" + b.amqpsPort + "?transport.trustStoreLocation=" + dir.resolve("empty.p12")
            + "&transport.trustStorePassword=changeit&transport.trustStoreType=PKCS12";
        KeyStore empty = KeyStore.getInstance("PKCS12");
        empty.load(null, null);
        try (var out = Files.newOutputStream(dir.resolve("empty.p12"))) {
            empty.store(out, "changeit".toCharArray());
        }
        assertThrows(JMSRuntimeException.class, () -> Jms.factory(untrusting).createContext().close());
    }
}
