package omnibus.jms;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;

import javax.jms.JMSConsumer;
import javax.jms.JMSContext;
import javax.jms.Message;
import javax.jms.TextMessage;
import javax.jms.Topic;

import omnibus.Entities;
import omnibus.OmnibusExtension;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/** Topics: durable, shared durable and non-durable subscriptions, selectors, unsubscribe. */
@Timeout(60)
class TopicTest {
    @RegisterExtension
    static final OmnibusExtension omnibus = new OmnibusExtension(new Entities()
        .topic("jms-durable").topic("jms-shared").topic("jms-volatile").topic("jms-selector")
        .topic("jms-header-selector"));

    private static String text(Message m) throws Exception {
        assertNotNull(m, "no message");
        return ((TextMessage) m).getText();
    }

    @Test
    void durableSubscriptionKeepsMessagesWhileAway() throws Exception {
        try (JMSContext ctx = Jms.factory(omnibus.broker()).createContext()) {
            ctx.setClientID("client-a");
            Topic t = ctx.createTopic("jms-durable");
            JMSConsumer c = ctx.createDurableConsumer(t, "orders");
            ctx.createProducer().send(t, "one");
            assertEquals("one", text(c.receive(10_000)));
            c.close();
            ctx.createProducer().send(t, "while away");
        }
        try (JMSContext ctx = Jms.factory(omnibus.broker()).createContext()) {
            ctx.setClientID("client-a");
            Topic t = ctx.createTopic("jms-durable");
            JMSConsumer c = ctx.createDurableConsumer(t, "orders");
            assertEquals("while away", text(c.receive(10_000)));
            c.close();
            ctx.unsubscribe("orders");
        }
    }

    @Test
    void sharedDurableSubscriptionSplitsMessages() throws Exception {
        try (JMSContext a = Jms.factory(omnibus.broker()).createContext();
             JMSContext b = Jms.factory(omnibus.broker()).createContext()) {
            Topic t = a.createTopic("jms-shared");
            JMSConsumer ca = a.createSharedDurableConsumer(t, "workers");
            JMSConsumer cb = b.createSharedDurableConsumer(t, "workers");
            for (int i = 0; i < 4; i++) {
                a.createProducer().send(t, "m" + i);
            }
            int got = 0;
            for (JMSConsumer c : new JMSConsumer[] {ca, cb, ca, cb}) {
                if (c.receive(3_000) != null) {
                    got++;
                }
            }
            while (ca.receive(500) != null || cb.receive(500) != null) {
                got++;
            }
            assertEquals(4, got, "each message once across the two consumers");
            ca.close();
            cb.close();
            a.unsubscribe("workers");
        }
    }

    @Test
    void nonDurableSubscriptionSeesOnlyWhatCameWhileOpen() throws Exception {
        try (JMSContext ctx = Jms.factory(omnibus.broker()).createContext()) {
            Topic t = ctx.createTopic("jms-volatile");
            ctx.createProducer().send(t, "before");
            JMSConsumer c = ctx.createConsumer(t);
            ctx.createProducer().send(t, "during");
            assertEquals("during", text(c.receive(10_000)));
            assertNull(c.receive(1_000));
        }
    }

    @Test
    void selectorFiltersTheSubscription() throws Exception {
        try (JMSContext ctx = Jms.factory(omnibus.broker()).createContext()) {
            ctx.setClientID("client-s");
            Topic t = ctx.createTopic("jms-selector");
            JMSConsumer c = ctx.createDurableConsumer(t, "reds", "color = 'red' AND size > 2", false);
            TextMessage red = ctx.createTextMessage("big red");
            red.setStringProperty("color", "red");
            red.setIntProperty("size", 3);
            TextMessage small = ctx.createTextMessage("small red");
            small.setStringProperty("color", "red");
            small.setIntProperty("size", 1);
            TextMessage blue = ctx.createTextMessage("big blue");
            blue.setStringProperty("color", "blue");
            blue.setIntProperty("size", 5);
            ctx.createProducer().send(t, small).send(t, blue).send(t, red);
            assertEquals("big red", text(c.receive(10_000)));
            assertNull(c.receive(1_000));
            c.close();
            ctx.unsubscribe("reds");
        }
    }

    @Test
    void selectorOnJmsHeaders() throws Exception {
        try (JMSContext ctx = Jms.factory(omnibus.broker()).createContext()) {
            Topic t = ctx.createTopic("jms-header-selector");
            // As in Microsoft's JMS samples: a header field and a property.
            JMSConsumer c = ctx.createSharedDurableConsumer(t, "picky", "JMSCorrelationID = 'c-5' AND prop1 = 'test'");
            for (int i = 0; i < 10; i++) {
                TextMessage m = ctx.createTextMessage("m" + i);
                m.setJMSCorrelationID("c-" + i);
                m.setStringProperty("prop1", "test");
                ctx.createProducer().send(t, m);
            }
            TextMessage typed = ctx.createTextMessage("typed");
            typed.setJMSType("order");
            ctx.createProducer().send(t, typed);
            assertEquals("m5", text(c.receive(10_000)));
            assertNull(c.receive(1_000));
            c.close();
            ctx.unsubscribe("picky");
            JMSConsumer byType = ctx.createSharedDurableConsumer(t, "orders", "JMSType = 'order'");
            ctx.createProducer().send(t, typed);
            assertEquals("typed", text(byType.receive(10_000)));
            byType.close();
            ctx.unsubscribe("orders");
        }
    }
}
