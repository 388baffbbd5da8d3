package omnibus.jms;

import java.util.Map;
import omnibus.Broker;
import org.apache.qpid.jms.JmsConnectionExtensions;
import org.apache.qpid.jms.JmsConnectionFactory;

/**
 * Qpid JMS connection factories for a test's broker, made the way
 * Microsoft's azure-servicebus-jms library makes them.
 */
final class Jms {
    private Jms() {
    }

    /**
     * A factory on the broker's plain AMQP port, logging in with SASL PLAIN
     * as the key's name and the key, with what azure-servicebus-jms adds:
     * prefetch 0 (jms.prefetchPolicy.all=0) and the open properties
     * com.microsoft:is-client-provider and user-agent.
     */
    static JmsConnectionFactory factory(Broker b) {
        return factory("amqp://" + b.host + ":" + b.amqpPort + "?jms.prefetchPolicy.all=0");
    }

    /**
     * A plain Qpid JMS factory: SASL PLAIN with the key, without what
     * azure-servicebus-jms adds (so no entity is made on the fly).
     */
    static JmsConnectionFactory plainFactory(Broker b) {
        return new JmsConnectionFactory(Broker.KEY_NAME, Broker.KEY, "amqp://" + b.host + ":" + b.amqpPort);
    }

    /** The same as {@link #factory(Broker)} on any URI (amqps://, query options). */
    static JmsConnectionFactory factory(String uri) {
        JmsConnectionFactory f = new JmsConnectionFactory(Broker.KEY_NAME, Broker.KEY, uri);
        f.setExtension(JmsConnectionExtensions.AMQP_OPEN_PROPERTIES.toString(),
            (connection, remote) -> Map.of("com.microsoft:is-client-provider", true, "user-agent", "omnibus-jmstest"));
        return f;
    }
}
