package omnibus;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.azure.core.amqp.AmqpTransportType;
import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.administration.ServiceBusAdministrationClient;
import com.azure.messaging.servicebus.administration.ServiceBusAdministrationClientBuilder;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The ordinary connection string as a cloud namespace has it, with no port
 * (Endpoint=sb://host/): the SDK dials AMQPS on 5671, wss on 443 and the
 * admin client HTTPS on 443. The broker gets a 127.x.y.z address of its
 * own with AMQPS on 5671 and, where the process may bind it (as root, as
 * CI runs), HTTPS on 443.
 */
@Timeout(60)
class Connect5671Test {
    @RegisterExtension
    static final OmnibusExtension omnibus = new OmnibusExtension(new Entities()
        .queue("amqps-5671")
        .queue("wss-443"))
        .on5671();

    private static ServiceBusClientBuilder client() {
        return new ServiceBusClientBuilder().connectionString(omnibus.broker().tlsConnectionString(-1))
            .retryOptions(Broker.RETRY);
    }

    /**
     * Skips a test that needs HTTPS on 443 where the process could not bind
     * it, saying why; fails instead where OMNIBUS_REQUIRE_ROOT_TESTS=1 (as
     * .ci/run sets it), since CI runs as root.
     */
    private static void need443() {
        boolean bound = omnibus.broker().httpsPort == 443;
        if (!bound && "1".equals(System.getenv("OMNIBUS_REQUIRE_ROOT_TESTS"))) {
            fail("port 443 of " + omnibus.broker().host + " could not be bound, and OMNIBUS_REQUIRE_ROOT_TESTS=1");
        }
        assumeTrue(bound, "binding port 443 takes root (CI runs as root; OMNIBUS_REQUIRE_ROOT_TESTS=1 fails here)");
    }

    @Test
    void amqpsOnTheDefaultPort() {
        ConnectTest.roundTrip(client(), "amqps-5671");
    }

    @Test
    void webSocketsOnTheDefaultPort() {
        need443();
        ConnectTest.roundTrip(client().transportType(AmqpTransportType.AMQP_WEB_SOCKETS), "wss-443");
    }

    @Test
    void adminClientOnTheDefaultPort() {
        need443();
        ServiceBusAdministrationClient admin = new ServiceBusAdministrationClientBuilder()
            .connectionString(omnibus.broker().tlsConnectionString(-1)).buildClient();
        assertEquals("amqps-5671", admin.getQueue("amqps-5671").getName());
    }
}
