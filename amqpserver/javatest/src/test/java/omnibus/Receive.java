package omnibus;

import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/** Bounded receive loops, so a broken broker fails a test instead of hanging the run. */
final class Receive {
    private Receive() {
    }

    /** Receives until n messages came or timeout passed; returns what came. */
    static List<ServiceBusReceivedMessage> atMost(ServiceBusReceiverClient r, int n, Duration timeout) {
        List<ServiceBusReceivedMessage> got = new ArrayList<>();
        long deadline = System.nanoTime() + timeout.toNanos();
        while (got.size() < n) {
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                break;
            }
            Duration wait = Duration.ofNanos(Math.min(left, Duration.ofSeconds(5).toNanos()));
            r.receiveMessages(n - got.size(), wait).forEach(got::add);
        }
        return got;
    }

    /** Receives n messages within 10 s; returns what came (the caller checks the count). */
    static List<ServiceBusReceivedMessage> n(ServiceBusReceiverClient r, int n) {
        return atMost(r, n, Duration.ofSeconds(10));
    }

    /** Receives for wait and returns whatever came (expected: nothing). */
    static List<ServiceBusReceivedMessage> none(ServiceBusReceiverClient r, Duration wait) {
        List<ServiceBusReceivedMessage> got = new ArrayList<>();
        r.receiveMessages(10, wait).forEach(got::add);
        return got;
    }

    /** Peeks the queue until it is empty or timeout passed; reports whether it emptied. */
    static boolean emptied(ServiceBusClientBuilder b, String queue, Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        try (ServiceBusReceiverClient r = b.receiver().queueName(queue).buildClient()) {
            for (;;) {
                // A peek goes on from the last one: start at 1 each time.
                if (!r.peekMessages(1, 1).iterator().hasNext()) {
                    return true;
                }
                if (System.nanoTime() > deadline) {
                    return false;
                }
                try {
                    Thread.sleep(100);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return false;
                }
            }
        }
    }

    /** The bodies as strings, in order. */
    static List<String> bodies(List<ServiceBusReceivedMessage> msgs) {
        List<String> out = new ArrayList<>();
        for (ServiceBusReceivedMessage m : msgs) {
            out.add(m.getBody().toString());
        }
        return out;
    }
}
