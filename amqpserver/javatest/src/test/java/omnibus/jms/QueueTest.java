package omnibus.jms;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import javax.jms.BytesMessage;
import javax.jms.JMSConsumer;
import javax.jms.JMSContext;
import javax.jms.MapMessage;
import javax.jms.Message;
import javax.jms.Queue;
import javax.jms.TextMessage;

import omnibus.Entities;
import omnibus.OmnibusExtension;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/** Queues through JMS 2.0's simplified API: message types, headers, properties, acknowledgement modes. */
@Timeout(60)
class QueueTest {
    @RegisterExtension
    static final OmnibusExtension omnibus = new OmnibusExtension(new Entities()
        .queue("jms-types").queue("jms-client-ack", Map.of("LockDuration", "PT5S")).queue("jms-headers"));

    @Test
    void everyMessageTypeRoundTrips() throws Exception {
        try (JMSContext ctx = Jms.factory(omnibus.broker()).createContext()) {
            Queue q = ctx.createQueue("jms-types");
            ctx.createProducer().send(q, "text body");
            ctx.createProducer().send(q, new byte[] {1, 2, 3});
            ctx.createProducer().send(q, Map.of("k", "v", "n", 7));
            BytesMessage empty = ctx.createBytesMessage();
            ctx.createProducer().send(q, empty);
            JMSConsumer c = ctx.createConsumer(q);
            Message m1 = c.receive(10_000);
            assertInstanceOf(TextMessage.class, m1);
            assertEquals("text body", ((TextMessage) m1).getText());
            Message m2 = c.receive(10_000);
            assertInstanceOf(BytesMessage.class, m2);
            assertEquals(3, ((BytesMessage) m2).getBodyLength());
            Message m3 = c.receive(10_000);
            assertInstanceOf(MapMessage.class, m3);
            assertEquals("v", ((MapMessage) m3).getString("k"));
            assertEquals(7, ((MapMessage) m3).getInt("n"));
            Message m4 = c.receive(10_000);
            assertInstanceOf(BytesMessage.class, m4);
            assertEquals(0, ((BytesMessage) m4).getBodyLength());
            assertNull(c.receiveNoWait());
        }
    }

    @Test
    void headersAndPropertiesRoundTrip() throws Exception {
        try (JMSContext ctx = Jms.factory(omnibus.broker()).createContext()) {
            Queue q = ctx.createQueue("jms-headers");
            Queue replyTo = ctx.createQueue("jms-types");
            TextMessage out = ctx.createTextMessage("with headers");
            out.setJMSCorrelationID("corr-1");
            out.setJMSType("order");
            out.setJMSReplyTo(replyTo);
            out.setStringProperty("color", "red");
            out.setIntProperty("count", 3);
            out.setLongProperty("big", 1L << 40);
            out.setBooleanProperty("flag", true);
            out.setDoubleProperty("ratio", 0.5);
            ctx.createProducer().setPriority(7).setTimeToLive(60_000).send(q, out);
            Message in = ctx.createConsumer(q).receive(10_000);
            assertNotNull(in);
            assertEquals(out.getJMSMessageID(), in.getJMSMessageID());
            assertEquals("corr-1", in.getJMSCorrelationID());
            assertEquals("order", in.getJMSType());
            assertEquals(replyTo, in.getJMSReplyTo());
            assertEquals(q, in.getJMSDestination());
            assertEquals(7, in.getJMSPriority());
            assertTrue(in.getJMSExpiration() > System.currentTimeMillis());
            assertEquals("red", in.getStringProperty("color"));
            assertEquals(3, in.getIntProperty("count"));
            assertEquals(1L << 40, in.getLongProperty("big"));
            assertTrue(in.getBooleanProperty("flag"));
            assertEquals(0.5, in.getDoubleProperty("ratio"));
            assertFalse(in.getJMSRedelivered());
            assertEquals(1, in.getIntProperty("JMSXDeliveryCount"));
        }
    }

    @Test
    void clientAcknowledgeAndRecover() throws Exception {
        try (JMSContext ctx = Jms.factory(omnibus.broker()).createContext(JMSContext.CLIENT_ACKNOWLEDGE)) {
            Queue q = ctx.createQueue("jms-client-ack");
            ctx.createProducer().send(q, "ack me");
            JMSConsumer c = ctx.createConsumer(q);
            Message first = c.receive(10_000);
            assertEquals("ack me", ((TextMessage) first).getText());
            ctx.recover(); // not acknowledged: delivered again
            Message again = c.receive(10_000);
            assertNotNull(again, "the message came back after recover");
            assertTrue(again.getJMSRedelivered());
            assertEquals(2, again.getIntProperty("JMSXDeliveryCount"));
            again.acknowledge();
            // Acknowledged: gone, also past its 5 s lock.
            assertNull(c.receive(7_000));
        }
    }
}
