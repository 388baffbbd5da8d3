package omnibus.jms;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import javax.jms.InvalidDestinationRuntimeException;
import javax.jms.JMSContext;
import javax.jms.JMSRuntimeException;
import javax.jms.TemporaryTopic;
import javax.jms.TextMessage;

import omnibus.Entities;
import omnibus.OmnibusExtension;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/** Temporary topics, entities made on the fly, and what omnibus refuses where Service Bus Premium differs (amqpserver/README.md, JMS). */
@Timeout(60)
class LimitsTest {
    @RegisterExtension
    static final OmnibusExtension omnibus = new OmnibusExtension(new Entities().queue("jms-limits"));

    @Test
    void temporaryTopic() throws Exception {
        try (JMSContext ctx = Jms.factory(omnibus.broker()).createContext()) {
            TemporaryTopic t = ctx.createTemporaryTopic();
            var c = ctx.createConsumer(t);
            ctx.createProducer().send(t, "to the temporary topic");
            assertEquals("to the temporary topic", ((TextMessage) c.receive(10_000)).getText());
        }
    }

    @Test
    void selectorOnAQueueIsRefused() throws Exception {
        try (JMSContext ctx = Jms.factory(omnibus.broker()).createContext()) {
            JMSRuntimeException e = assertThrows(JMSRuntimeException.class,
                () -> ctx.createConsumer(ctx.createQueue("jms-limits"), "color = 'red'"));
            assertTrue(e.getMessage().contains("topic consumers only"), e.getMessage());
        }
    }

    @Test
    void missingQueueIsMadeForAServiceBusJmsClient() throws Exception {
        // The factory marks its connections com.microsoft:is-client-provider,
        // as Microsoft's ServiceBusJmsConnectionFactory does.
        try (JMSContext ctx = Jms.factory(omnibus.broker()).createContext()) {
            ctx.createProducer().send(ctx.createQueue("jms-made-on-the-fly"), "first");
            assertEquals("first", ((TextMessage) ctx.createConsumer(ctx.createQueue("jms-made-on-the-fly")).receive(10_000)).getText());
        }
        // A plain Qpid JMS connection gets InvalidDestination instead.
        try (JMSContext ctx = Jms.plainFactory(omnibus.broker()).createContext()) {
            assertThrows(InvalidDestinationRuntimeException.class,
                () -> ctx.createProducer().send(ctx.createQueue("jms-not-made"), "x"));
        }
    }
}
