package omnibus.jms;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import javax.jms.InvalidDestinationRuntimeException;
import javax.jms.JMSConsumer;
import javax.jms.JMSContext;
import javax.jms.Message;
import javax.jms.Queue;
import javax.jms.TemporaryQueue;
import javax.jms.TextMessage;

import omnibus.Entities;
import omnibus.OmnibusExtension;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/** Temporary queues in the request-reply pattern: made, replied to through JMSReplyTo, gone with their connection. */
@Timeout(60)
class TemporaryQueueTest {
    @RegisterExtension
    static final OmnibusExtension omnibus = new OmnibusExtension(new Entities().queue("jms-requests"));

    @Test
    void requestReplyThroughATemporaryQueue() throws Exception {
        String tempName;
        try (JMSContext client = Jms.factory(omnibus.broker()).createContext();
             JMSContext server = Jms.factory(omnibus.broker()).createContext()) {
            TemporaryQueue replies = client.createTemporaryQueue();
            tempName = replies.getQueueName();
            Queue requests = client.createQueue("jms-requests");
            TextMessage req = client.createTextMessage("ping");
            req.setJMSReplyTo(replies);
            req.setJMSCorrelationID("r-1");
            client.createProducer().send(requests, req);

            Message got = server.createConsumer(server.createQueue("jms-requests")).receive(10_000);
            assertNotNull(got);
            assertEquals(tempName, ((Queue) got.getJMSReplyTo()).getQueueName());
            TextMessage reply = server.createTextMessage("pong");
            reply.setJMSCorrelationID(got.getJMSCorrelationID());
            server.createProducer().send(got.getJMSReplyTo(), reply);

            JMSConsumer c = client.createConsumer(replies);
            Message r = c.receive(10_000);
            assertEquals("pong", ((TextMessage) r).getText());
            assertEquals("r-1", r.getJMSCorrelationID());
        }
        // Gone with the connection that made it (a plain Qpid connection,
        // for which nothing is made on the fly).
        try (JMSContext other = Jms.plainFactory(omnibus.broker()).createContext()) {
            Queue gone = other.createQueue(tempName);
            assertThrows(InvalidDestinationRuntimeException.class, () -> other.createProducer().send(gone, "late"));
        }
    }
}
