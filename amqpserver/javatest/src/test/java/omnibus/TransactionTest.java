package omnibus;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.messaging.servicebus.ServiceBusTransactionContext;
import com.azure.messaging.servicebus.models.CompleteOptions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/** ServiceBusTransactionContext: complete + send committed as one, rolled back, across entities. */
@Timeout(60)
class TransactionTest {
    @RegisterExtension
    static final OmnibusExtension omnibus = new OmnibusExtension(new Entities()
        .queue("txn")
        .queue("rollback", Map.of("LockDuration", "PT5S"))
        .queue("first-call")
        .queue("txn-in")
        .queue("txn-out")
        .queue("span-in", Map.of("LockDuration", "PT5S"))
        .queue("span-out"));

    @Test
    void completeAndSendCommitTogether() {
        ServiceBusClientBuilder b = omnibus.broker().client();
        try (ServiceBusSenderClient sender = b.sender().queueName("txn").buildClient();
            ServiceBusReceiverClient r = b.receiver().queueName("txn").buildClient()) {
            sender.sendMessage(new ServiceBusMessage("input"));
            ServiceBusReceivedMessage in = Receive.n(r, 1).get(0);
            ServiceBusTransactionContext txn = sender.createTransaction();
            r.complete(in, new CompleteOptions().setTransactionContext(txn));
            sender.sendMessage(new ServiceBusMessage("output"), txn);
            assertEquals(List.of("input"), peekAll(r), "before the commit: the input is there, no output");
            sender.commitTransaction(txn);
            assertEquals(List.of("output"), peekAll(r), "after it: the output only");
            r.complete(Receive.n(r, 1).get(0));
        }
    }

    @Test
    void rollbackSendsNothingAndTheInputComesBackAfterItsLock() {
        ServiceBusClientBuilder b = omnibus.broker().client();
        try (ServiceBusSenderClient sender = b.sender().queueName("rollback").buildClient();
            ServiceBusReceiverClient r = b.receiver().queueName("rollback").buildClient()) {
            sender.sendMessage(new ServiceBusMessage("input"));
            ServiceBusReceivedMessage in = Receive.n(r, 1).get(0);
            ServiceBusTransactionContext txn = sender.createTransaction();
            r.complete(in, new CompleteOptions().setTransactionContext(txn));
            sender.sendMessage(new ServiceBusMessage("output"), txn);
            sender.rollbackTransaction(txn);
            assertEquals(List.of("input"), peekAll(r), "nothing of the transaction happened");
            // Still locked by its receiver (the SDK counts the delivery as
            // settled, so only the lock's end frees it): back after 5 s.
            List<ServiceBusReceivedMessage> again = Receive.atMost(r, 1, Duration.ofSeconds(15));
            assertEquals(List.of("input"), Receive.bodies(again));
            assertEquals(1, again.get(0).getDeliveryCount());
            r.complete(again.get(0));
            assertEquals(List.of(), peekAll(r));
        }
    }

    @Test
    void createTransactionAsTheFirstCallOfAConnection() {
        // The coordinator is then the connection's first link, attached
        // before any token was put.
        ServiceBusClientBuilder b = omnibus.broker().client();
        try (ServiceBusSenderClient sender = b.sender().queueName("first-call").buildClient();
            ServiceBusReceiverClient r = b.receiver().queueName("first-call").buildClient()) {
            ServiceBusTransactionContext txn = sender.createTransaction();
            sender.sendMessage(new ServiceBusMessage("in a transaction"), txn);
            assertEquals(List.of(), peekAll(r));
            sender.commitTransaction(txn);
            assertEquals(List.of("in a transaction"), peekAll(r));
            r.complete(Receive.n(r, 1).get(0));
        }
    }

    @Test
    void crossEntityTransactionCompletesOneQueueAndSendsToAnother() {
        // One session for every link, its first entity the input: the
        // sender to txn-out sends through it (send-via).
        ServiceBusClientBuilder b = omnibus.broker().client().enableCrossEntityTransactions();
        try (ServiceBusReceiverClient r = b.receiver().queueName("txn-in").buildClient();
            ServiceBusSenderClient out = b.sender().queueName("txn-out").buildClient();
            ServiceBusSenderClient in = omnibus.broker().client().sender().queueName("txn-in").buildClient()) {
            in.sendMessage(new ServiceBusMessage("order"));
            ServiceBusReceivedMessage m = Receive.n(r, 1).get(0);
            ServiceBusTransactionContext txn = out.createTransaction();
            r.complete(m, new CompleteOptions().setTransactionContext(txn));
            out.sendMessage(new ServiceBusMessage("shipped"), txn);
            out.commitTransaction(txn);
        }
        ServiceBusClientBuilder plain = omnibus.broker().client();
        try (ServiceBusReceiverClient in = plain.receiver().queueName("txn-in").buildClient();
            ServiceBusReceiverClient out = plain.receiver().queueName("txn-out").buildClient()) {
            assertEquals(List.of(), peekAll(in), "the input was completed");
            assertEquals(List.of("shipped"), peekAll(out), "the output arrived");
            out.complete(Receive.n(out, 1).get(0));
        }
    }

    @Test
    void aTransactionThatReachesASecondEntityFailsToCommitAndLosesNothing() {
        ServiceBusClientBuilder b = omnibus.broker().client();
        try (ServiceBusSenderClient in = b.sender().queueName("span-in").buildClient();
            ServiceBusSenderClient out = b.sender().queueName("span-out").buildClient();
            ServiceBusReceiverClient r = b.receiver().queueName("span-in").buildClient();
            ServiceBusReceiverClient outR = b.receiver().queueName("span-out").buildClient()) {
            in.sendMessage(new ServiceBusMessage("x"));
            ServiceBusReceivedMessage m = Receive.n(r, 1).get(0);
            ServiceBusTransactionContext txn = in.createTransaction();
            r.complete(m, new CompleteOptions().setTransactionContext(txn));
            // Refused by the broker (cannot span multiple top-level
            // entities), but the SDK does not read a transactional send's
            // answer: this returns normally.
            out.sendMessage(new ServiceBusMessage("y"), txn);
            // The refusal doomed the transaction: the commit throws.
            RuntimeException e = assertThrows(RuntimeException.class, () -> in.commitTransaction(txn));
            assertTrue(String.valueOf(e.getMessage()).contains("amqp:transaction:rollback"), e.toString());
            assertEquals(List.of(), peekAll(outR), "nothing sent");
            List<ServiceBusReceivedMessage> again = Receive.atMost(r, 1, Duration.ofSeconds(15));
            assertEquals(List.of("x"), Receive.bodies(again), "the input comes back after its lock");
            r.complete(again.get(0));
        }
    }

    private static List<String> peekAll(ServiceBusReceiverClient r) {
        List<String> out = new ArrayList<>();
        r.peekMessages(50).forEach(m -> out.add(m.getBody().toString()));
        return out;
    }
}
