package omnibus.child;

import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusProcessorClient;

/**
 * A processor that takes messages and never finishes with them: each
 * handler prints "holding BODY" and blocks. Args: connection string,
 * queue, maxConcurrentCalls. The test kills this JVM.
 */
public final class HoldingProcessor {
    private HoldingProcessor() {
    }

    public static void main(String[] args) throws Exception {
        ServiceBusProcessorClient p = new ServiceBusClientBuilder().connectionString(args[0]).processor()
            .queueName(args[1])
            .maxConcurrentCalls(Integer.parseInt(args[2]))
            .disableAutoComplete()
            .maxAutoLockRenewDuration(java.time.Duration.ZERO)
            .processMessage(ctx -> {
                System.out.println("holding " + ctx.getMessage().getBody());
                System.out.flush();
                try {
                    Thread.sleep(Long.MAX_VALUE);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            })
            .processError(ctx -> System.out.println("error " + ctx.getException()))
            .buildProcessorClient();
        p.start();
        System.out.println("started");
        Thread.sleep(Long.MAX_VALUE);
    }
}
