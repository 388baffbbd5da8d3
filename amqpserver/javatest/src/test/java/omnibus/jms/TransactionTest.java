package omnibus.jms;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import javax.jms.JMSConsumer;
import javax.jms.JMSContext;
import javax.jms.Message;
import javax.jms.Queue;
import javax.jms.TextMessage;

import omnibus.Entities;
import omnibus.OmnibusExtension;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/** Transacted sessions: sends and acknowledgements take effect on commit, none on rollback. */
@Timeout(60)
class TransactionTest {
    @RegisterExtension
    static final OmnibusExtension omnibus = new OmnibusExtension(new Entities()
        .queue("jms-tx-send").queue("jms-tx-ack", Map.of("LockDuration", "PT5S"))
        .queue("jms-tx-in").queue("jms-tx-out").queue("jms-tx-other"));

    @Test
    void sendsShowOnlyAfterCommit() throws Exception {
        try (JMSContext tx = Jms.factory(omnibus.broker()).createContext(JMSContext.SESSION_TRANSACTED);
             JMSContext plain = Jms.factory(omnibus.broker()).createContext()) {
            Queue q = tx.createQueue("jms-tx-send");
            JMSConsumer watcher = plain.createConsumer(plain.createQueue("jms-tx-send"));
            tx.createProducer().send(q, "rolled back");
            tx.rollback();
            tx.createProducer().send(q, "one").send(q, "two");
            assertNull(watcher.receive(1_000), "nothing before the commit");
            tx.commit();
            assertEquals("one", ((TextMessage) watcher.receive(10_000)).getText());
            assertEquals("two", ((TextMessage) watcher.receive(10_000)).getText());
            assertNull(watcher.receive(1_000), "the rolled back send never arrives");
        }
    }

    @Test
    void acknowledgementsTakeEffectOnCommit() throws Exception {
        try (JMSContext tx = Jms.factory(omnibus.broker()).createContext(JMSContext.SESSION_TRANSACTED)) {
            Queue q = tx.createQueue("jms-tx-ack");
            tx.createProducer().send(q, "work");
            tx.commit();
            JMSConsumer c = tx.createConsumer(q);
            Message first = c.receive(10_000);
            assertNotNull(first);
            tx.rollback(); // the receive is undone: delivered again
            Message again = c.receive(10_000);
            assertNotNull(again, "redelivered after rollback");
            assertTrue(again.getJMSRedelivered());
            tx.commit();
            assertNull(c.receive(7_000), "consumed by the commit, also past its 5 s lock");
        }
    }

    @Test
    void consumeAndProduceAcrossQueuesInOneTransaction() throws Exception {
        try (JMSContext tx = Jms.factory(omnibus.broker()).createContext(JMSContext.SESSION_TRANSACTED);
             JMSContext plain = Jms.factory(omnibus.broker()).createContext()) {
            plain.createProducer().send(plain.createQueue("jms-tx-in"), "input");
            // Qpid attaches the session's coordinator first, so, as Service
            // Bus does, the session's first entity (jms-tx-in) carries the
            // transaction and the sends to the other queues go through it.
            JMSConsumer in = tx.createConsumer(tx.createQueue("jms-tx-in"));
            Message m = in.receive(10_000);
            assertNotNull(m);
            tx.createProducer().send(tx.createQueue("jms-tx-out"), "output")
                .send(tx.createQueue("jms-tx-other"), "audit");
            JMSConsumer out = plain.createConsumer(plain.createQueue("jms-tx-out"));
            assertNull(out.receive(1_000), "nothing before the commit");
            tx.commit();
            assertEquals("output", ((TextMessage) out.receive(10_000)).getText());
            assertEquals("audit", ((TextMessage) plain.createConsumer(plain.createQueue("jms-tx-other")).receive(10_000)).getText());
            assertNull(in.receive(1_000), "the input was consumed by the commit");
        }
    }
}
