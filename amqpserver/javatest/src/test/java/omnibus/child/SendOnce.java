package omnibus.child;

import com.azure.core.amqp.AmqpRetryOptions;
import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import java.time.Duration;

/**
 * Sends one message and prints "sent", or "failed" and the error. Args:
 * connection string, queue.
 */
public final class SendOnce {
    private SendOnce() {
    }

    public static void main(String[] args) {
        try (ServiceBusSenderClient s = new ServiceBusClientBuilder().connectionString(args[0])
            .retryOptions(new AmqpRetryOptions().setMaxRetries(0).setTryTimeout(Duration.ofSeconds(5)))
            .sender().queueName(args[1]).buildClient()) {
            s.sendMessage(new ServiceBusMessage("from a child JVM"));
            System.out.println("sent");
        } catch (RuntimeException e) {
            Throwable root = e;
            while (root.getCause() != null) {
                root = root.getCause();
            }
            System.out.println("failed " + e + " / " + root);
        }
        System.exit(0);
    }
}
