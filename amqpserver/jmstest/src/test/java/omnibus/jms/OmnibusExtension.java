package omnibus.jms;

import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.TestExecutionExceptionHandler;

/**
 * Starts one omnibus per test class and stops it after the class, also
 * when a test fails. Use it as a static field:
 *
 * <pre>
 * &#64;RegisterExtension
 * static final OmnibusExtension omnibus = new OmnibusExtension(new Entities().queue("orders"));
 * </pre>
 *
 * A failing test's error carries the broker's last log lines;
 * OMNIBUS_JMSTEST_LOG=1 copies the log to stderr as it comes.
 */
public final class OmnibusExtension implements BeforeAllCallback, AfterAllCallback, TestExecutionExceptionHandler {
    private final Entities entities;
    private Broker broker;

    public OmnibusExtension(Entities entities) {
        this.entities = entities;
    }

    /** The class's running broker. */
    public Broker broker() {
        if (broker == null) {
            throw new IllegalStateException("the broker is not running (use OmnibusExtension as a static field)");
        }
        return broker;
    }

    @Override
    public void beforeAll(ExtensionContext context) throws Exception {
        broker = Broker.start(Run.get(context), entities);
    }

    @Override
    public void afterAll(ExtensionContext context) {
        if (broker != null) {
            broker.stop();
            broker = null;
        }
    }

    @Override
    public void handleTestExecutionException(ExtensionContext context, Throwable t) throws Throwable {
        if (broker != null) {
            t.addSuppressed(new BrokerLog(broker.tail(40)));
        }
        throw t;
    }

    /** The broker's log at a failure, attached to the test's error. */
    static final class BrokerLog extends Exception {
        BrokerLog(String tail) {
            super("omnibus's last log lines:\n" + tail, null, false, false);
        }
    }
}
