package omnibus.child;

import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.messaging.servicebus.ServiceBusTransactionContext;
import com.azure.messaging.servicebus.models.CompleteOptions;
import java.time.Duration;

/**
 * Receives one message, completes it and sends another inside a
 * transaction, prints "open BODY" and exits the JVM without committing or
 * closing anything. Args: connection string, queue.
 */
public final class OpenTransaction {
    private OpenTransaction() {
    }

    public static void main(String[] args) {
        ServiceBusClientBuilder b = new ServiceBusClientBuilder().connectionString(args[0]);
        ServiceBusSenderClient sender = b.sender().queueName(args[1]).buildClient();
        ServiceBusReceiverClient receiver = b.receiver().queueName(args[1]).buildClient();
        ServiceBusReceivedMessage m = null;
        for (int i = 0; i < 10 && m == null; i++) {
            for (ServiceBusReceivedMessage got : receiver.receiveMessages(1, Duration.ofSeconds(2))) {
                m = got;
            }
        }
        if (m == null) {
            System.out.println("nothing received");
            System.exit(2);
        }
        ServiceBusTransactionContext txn = sender.createTransaction();
        receiver.complete(m, new CompleteOptions().setTransactionContext(txn));
        sender.sendMessage(new ServiceBusMessage("output"), txn);
        System.out.println("open " + m.getBody());
        System.out.flush();
        System.exit(0);
    }
}
