package omnibus;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusErrorContext;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusProcessorClient;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/** ServiceBusProcessorClient: concurrent handlers, auto-complete, lock renewal; explicit lock renewal. */
@Timeout(60)
class ProcessorTest {
    @RegisterExtension
    static final OmnibusExtension omnibus = new OmnibusExtension(new Entities()
        .queue("concurrent")
        .queue("renew", Map.of("LockDuration", "PT5S"))
        .queue("renew-explicit", Map.of("LockDuration", "PT5S")));

    @Test
    void processorRunsMaxConcurrentCallsHandlersAtOnceAndCompletesEachMessage() throws Exception {
        ServiceBusClientBuilder b = omnibus.broker().client();
        int concurrency = 4, total = 12;
        try (ServiceBusSenderClient sender = b.sender().queueName("concurrent").buildClient()) {
            List<ServiceBusMessage> msgs = new ArrayList<>();
            for (int i = 0; i < total; i++) {
                msgs.add(new ServiceBusMessage("m" + i));
            }
            sender.sendMessages(msgs);
        }
        AtomicInteger inside = new AtomicInteger(), most = new AtomicInteger();
        CountDownLatch allIn = new CountDownLatch(concurrency);
        CountDownLatch done = new CountDownLatch(total);
        Set<String> seen = ConcurrentHashMap.newKeySet();
        List<Throwable> errors = Collections.synchronizedList(new ArrayList<>());
        ServiceBusProcessorClient processor = b.processor().queueName("concurrent").maxConcurrentCalls(concurrency)
            .processMessage(ctx -> {
                int now = inside.incrementAndGet();
                most.accumulateAndGet(now, Math::max);
                allIn.countDown();
                try {
                    // The first handlers wait for each other: they can only
                    // all be inside at once if the broker delivered that many.
                    allIn.await(10, TimeUnit.SECONDS);
                    Thread.sleep(20);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                seen.add(ctx.getMessage().getBody().toString());
                inside.decrementAndGet();
                done.countDown();
            })
            .processError(ctx -> errors.add(ctx.getException()))
            .buildProcessorClient();
        processor.start();
        try {
            assertTrue(done.await(30, TimeUnit.SECONDS), "processed " + seen.size() + " of " + total);
            // Completions follow the handlers: wait for them before closing.
            assertTrue(Receive.emptied(b, "concurrent", Duration.ofSeconds(10)), "auto-complete removed every message");
        } finally {
            processor.close();
        }
        assertEquals(concurrency, most.get(), "handlers inside at once");
        assertEquals(total, seen.size());
        assertEquals(List.of(), errors);
    }

    @Test
    void processorRenewsTheLockOfAHandlerThatOutlastsIt() throws Exception {
        ServiceBusClientBuilder b = omnibus.broker().client();
        try (ServiceBusSenderClient sender = b.sender().queueName("renew").buildClient()) {
            sender.sendMessage(new ServiceBusMessage("slow"));
        }
        List<ServiceBusReceivedMessage> handled = Collections.synchronizedList(new ArrayList<>());
        List<Throwable> errors = Collections.synchronizedList(new ArrayList<>());
        CountDownLatch completed = new CountDownLatch(1);
        ServiceBusProcessorClient processor = b.processor().queueName("renew")
            .maxAutoLockRenewDuration(Duration.ofSeconds(30))
            .disableAutoComplete()
            .processMessage(ctx -> {
                handled.add(ctx.getMessage());
                OffsetDateTime firstLock = ctx.getMessage().getLockedUntil();
                try {
                    // Past the 5 s lock: only renewals keep it.
                    Thread.sleep(7_000);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                assertTrue(OffsetDateTime.now().isAfter(firstLock), "the handler outlasted the first lock");
                ctx.complete();
                completed.countDown();
            })
            .processError(ctx -> errors.add(ctx.getException()))
            .buildProcessorClient();
        processor.start();
        try {
            assertTrue(completed.await(30, TimeUnit.SECONDS), "complete after 7 s on a 5 s lock; errors " + errors);
        } finally {
            processor.close();
        }
        assertEquals(1, handled.size(), "delivered once: the lock never lapsed");
        assertEquals(List.of(), errors);
        try (ServiceBusReceiverClient r = b.receiver().queueName("renew").buildClient()) {
            assertEquals(null, r.peekMessage(), "completed");
        }
    }

    @Test
    void renewMessageLockMovesLockedUntil() throws Exception {
        ServiceBusClientBuilder b = omnibus.broker().client();
        try (ServiceBusSenderClient sender = b.sender().queueName("renew-explicit").buildClient();
            ServiceBusReceiverClient r = b.receiver().queueName("renew-explicit").buildClient()) {
            sender.sendMessage(new ServiceBusMessage("hold"));
            ServiceBusReceivedMessage m = Receive.n(r, 1).get(0);
            OffsetDateTime first = m.getLockedUntil();
            Thread.sleep(1_100);
            OffsetDateTime renewed = r.renewMessageLock(m);
            assertTrue(renewed.isAfter(first.plusSeconds(1)), "renewed until " + renewed + ", first " + first);
            Thread.sleep(4_500);
            // Past the first lock, within the renewed one.
            r.complete(m);
            assertEquals(null, r.peekMessage());
        }
    }

    static String describe(ServiceBusErrorContext ctx) {
        return ctx.getErrorSource() + ": " + ctx.getException();
    }
}
