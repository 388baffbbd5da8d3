package omnibus;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverAsyncClient;
import com.azure.messaging.servicebus.ServiceBusSenderAsyncClient;
import com.azure.messaging.servicebus.ServiceBusSessionReceiverAsyncClient;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/** The reactive clients: a receive Flux settling as it goes, and a session's. */
@Timeout(60)
class AsyncTest {
    @RegisterExtension
    static final OmnibusExtension omnibus = new OmnibusExtension(new Entities()
        .queue("async")
        .queue("async-sessions", Map.of("RequiresSession", true)));

    private static final Duration WAIT = Duration.ofSeconds(20);

    @Test
    void receiveFluxCompletesEachMessage() {
        ServiceBusClientBuilder b = omnibus.broker().client();
        ServiceBusSenderAsyncClient sender = b.sender().queueName("async").buildAsyncClient();
        ServiceBusReceiverAsyncClient receiver = b.receiver().queueName("async").disableAutoComplete()
            .buildAsyncClient();
        try {
            List<ServiceBusMessage> msgs = new ArrayList<>();
            for (int i = 0; i < 20; i++) {
                msgs.add(new ServiceBusMessage("a" + i));
            }
            sender.sendMessages(msgs).block(WAIT);
            // Settle, then count: cancelling the receive Flux closes its link.
            List<String> got = receiver.receiveMessages()
                .concatMap(m -> receiver.complete(m).thenReturn(m.getBody().toString()))
                .take(20).collectList().block(WAIT);
            List<String> want = new ArrayList<>();
            msgs.forEach(m -> want.add(m.getBody().toString()));
            assertEquals(want, got);
            assertEquals(null, receiver.peekMessage().block(WAIT), "every message completed");
        } finally {
            sender.close();
            receiver.close();
        }
    }

    @Test
    void sessionReceiverFluxKeepsTheSessionsOrder() {
        ServiceBusClientBuilder b = omnibus.broker().client();
        ServiceBusSenderAsyncClient sender = b.sender().queueName("async-sessions").buildAsyncClient();
        ServiceBusSessionReceiverAsyncClient sessions = b.sessionReceiver().queueName("async-sessions")
            .disableAutoComplete().buildAsyncClient();
        try {
            List<ServiceBusMessage> msgs = new ArrayList<>();
            for (int i = 0; i < 5; i++) {
                msgs.add(new ServiceBusMessage("s" + i).setSessionId("reactive"));
            }
            sender.sendMessages(msgs).block(WAIT);
            List<String> got = Mono.usingWhen(sessions.acceptSession("reactive"),
                r -> r.receiveMessages()
                    .concatMap(m -> r.complete(m).thenReturn(m.getBody().toString()))
                    .take(5).collectList(),
                r -> Mono.fromRunnable(r::close).subscribeOn(Schedulers.boundedElastic()).then()).block(WAIT);
            assertEquals(List.of("s0", "s1", "s2", "s3", "s4"), got);
        } finally {
            sender.close();
            sessions.close();
        }
    }
}
