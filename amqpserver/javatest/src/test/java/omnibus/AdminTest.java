package omnibus;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.azure.core.exception.ResourceExistsException;
import com.azure.core.exception.ResourceNotFoundException;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.messaging.servicebus.administration.ServiceBusAdministrationClient;
import com.azure.messaging.servicebus.administration.models.CreateQueueOptions;
import com.azure.messaging.servicebus.administration.models.CreateRuleOptions;
import com.azure.messaging.servicebus.administration.models.CreateSubscriptionOptions;
import com.azure.messaging.servicebus.administration.models.QueueProperties;
import com.azure.messaging.servicebus.administration.models.QueueRuntimeProperties;
import com.azure.messaging.servicebus.administration.models.RuleProperties;
import com.azure.messaging.servicebus.administration.models.SqlRuleFilter;
import com.azure.messaging.servicebus.administration.models.SubscriptionProperties;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * ServiceBusAdministrationClient over HTTPS, trusting omnibus's CA through
 * the JVM's trust store (see Run).
 */
@Timeout(60)
class AdminTest {
    @RegisterExtension
    static final OmnibusExtension omnibus = new OmnibusExtension(new Entities().queue("existing"));

    @Test
    void queuesAreCreatedReadUpdatedCountedAndDeleted() {
        ServiceBusAdministrationClient admin = omnibus.broker().admin().buildClient();
        QueueProperties created = admin.createQueue("made-by-java", new CreateQueueOptions()
            .setLockDuration(Duration.ofSeconds(45))
            .setMaxDeliveryCount(7)
            .setDefaultMessageTimeToLive(Duration.ofHours(2))
            .setDeadLetteringOnMessageExpiration(true));
        assertEquals("made-by-java", created.getName());
        QueueProperties got = admin.getQueue("made-by-java");
        assertEquals(Duration.ofSeconds(45), got.getLockDuration());
        assertEquals(7, got.getMaxDeliveryCount());
        assertEquals(Duration.ofHours(2), got.getDefaultMessageTimeToLive());
        assertTrue(got.isDeadLetteringOnMessageExpiration());

        got.setMaxDeliveryCount(3);
        admin.updateQueue(got);
        assertEquals(3, admin.getQueue("made-by-java").getMaxDeliveryCount(), "updated");

        List<String> names = new ArrayList<>();
        admin.listQueues().forEach(q -> names.add(q.getName()));
        assertTrue(names.containsAll(List.of("existing", "made-by-java")), "listed " + names);

        try (ServiceBusSenderClient sender = omnibus.broker().client().sender().queueName("made-by-java")
            .buildClient()) {
            for (int i = 0; i < 3; i++) {
                sender.sendMessage(new ServiceBusMessage("m" + i));
            }
        }
        QueueRuntimeProperties rt = admin.getQueueRuntimeProperties("made-by-java");
        assertEquals(3, rt.getActiveMessageCount());
        assertEquals(3, rt.getTotalMessageCount());

        assertThrows(ResourceExistsException.class, () -> admin.createQueue("made-by-java"), "409 on a second create");
        admin.deleteQueue("made-by-java");
        assertFalse(admin.getQueueExists("made-by-java"));
        assertThrows(ResourceNotFoundException.class, () -> admin.getQueue("made-by-java"), "404 once deleted");
    }

    @Test
    void topicsSubscriptionsAndRulesAreManaged() {
        ServiceBusAdministrationClient admin = omnibus.broker().admin().buildClient();
        admin.createTopic("java-topic");
        SubscriptionProperties sub = admin.createSubscription("java-topic", "java-sub",
            new CreateSubscriptionOptions().setMaxDeliveryCount(4));
        assertEquals(4, sub.getMaxDeliveryCount());
        // The Java admin client takes the rule's name before the subscription's.
        admin.createRule("java-topic", "priority", "java-sub", new CreateRuleOptions(new SqlRuleFilter("p > 1")));
        List<String> rules = new ArrayList<>();
        admin.listRules("java-topic", "java-sub").forEach(r -> rules.add(r.getName()));
        assertEquals(List.of("$Default", "priority"), rules);
        RuleProperties rule = admin.getRule("java-topic", "java-sub", "priority");
        assertEquals("p > 1", ((SqlRuleFilter) rule.getFilter()).getSqlExpression());
        assertEquals(1, admin.getTopicRuntimeProperties("java-topic").getSubscriptionCount());
        admin.deleteSubscription("java-topic", "java-sub");
        admin.deleteTopic("java-topic");
        assertFalse(admin.getTopicExists("java-topic"));
    }
}
