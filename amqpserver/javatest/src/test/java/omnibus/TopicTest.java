package omnibus;

import static omnibus.Entities.correlationRule;
import static omnibus.Entities.sqlRule;
import static omnibus.Entities.subscription;
import static org.junit.jupiter.api.Assertions.assertEquals;

import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusRuleManagerClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.messaging.servicebus.administration.models.CorrelationRuleFilter;
import com.azure.messaging.servicebus.administration.models.CreateRuleOptions;
import com.azure.messaging.servicebus.administration.models.RuleProperties;
import com.azure.messaging.servicebus.administration.models.SqlRuleAction;
import com.azure.messaging.servicebus.administration.models.SqlRuleFilter;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/** Topics with subscriptions and rules: SQL and correlation filters, actions, the rule manager client. */
@Timeout(60)
class TopicTest {
    @RegisterExtension
    static final OmnibusExtension omnibus = new OmnibusExtension(new Entities()
        .topic("events",
            subscription("all", Map.of()),
            subscription("red", Map.of(), sqlRule("red-only", "color = 'red' AND qty > 2", null)),
            subscription("orders", Map.of(),
                correlationRule("eu-orders", Map.of("CorrelationId", "order", "Properties", Map.of("region", "eu")))),
            subscription("tagged", Map.of(), sqlRule("tag", "1=1", "SET tag = 'seen'; SET sys.Label = 'tagged'")))
        .topic("managed", subscription("rules", Map.of())));

    @Test
    void filtersAndActionsPickAndChangeWhatEachSubscriptionGets() {
        ServiceBusClientBuilder b = omnibus.broker().client();
        try (ServiceBusSenderClient sender = b.sender().topicName("events").buildClient()) {
            sender.sendMessage(msg("red-3", Map.of("color", "red", "qty", 3)));
            sender.sendMessage(msg("red-1", Map.of("color", "red", "qty", 1)));
            sender.sendMessage(msg("blue-5", Map.of("color", "blue", "qty", 5)));
            sender.sendMessage(msg("eu-order", Map.of("region", "eu")).setCorrelationId("order"));
            sender.sendMessage(msg("us-order", Map.of("region", "us")).setCorrelationId("order"));
        }
        assertEquals(List.of("red-3", "red-1", "blue-5", "eu-order", "us-order"), drain(b, "all", 5));
        assertEquals(List.of("red-3"), drain(b, "red", 1), "SQL filter");
        assertEquals(List.of("eu-order"), drain(b, "orders", 1), "correlation filter");
        try (ServiceBusReceiverClient r = b.receiver().topicName("events").subscriptionName("tagged").buildClient()) {
            List<ServiceBusReceivedMessage> got = Receive.n(r, 5);
            assertEquals(5, got.size());
            for (ServiceBusReceivedMessage m : got) {
                assertEquals("seen", m.getApplicationProperties().get("tag"), "action set a property");
                assertEquals("tagged", m.getSubject(), "action set sys.Label");
                r.complete(m);
            }
        }
    }

    @Test
    void ruleManagerCreatesListsAndDeletesRules() {
        ServiceBusClientBuilder b = omnibus.broker().client();
        try (ServiceBusRuleManagerClient rules = b.ruleManager().topicName("managed").subscriptionName("rules")
            .buildClient()) {
            List<String> names = new ArrayList<>();
            rules.listRules().forEach(r -> names.add(r.getName()));
            assertEquals(List.of("$Default"), names, "a new subscription has the default rule");
            rules.deleteRule("$Default");
            rules.createRule("big", new CreateRuleOptions(new SqlRuleFilter("size > 10"))
                .setAction(new SqlRuleAction("SET kind = 'big'")));
            CorrelationRuleFilter corr = new CorrelationRuleFilter().setLabel("urgent");
            rules.createRule("urgent", new CreateRuleOptions(corr));
            List<RuleProperties> listed = new ArrayList<>();
            rules.listRules().forEach(listed::add);
            assertEquals(2, listed.size(), "rules " + listed);
            RuleProperties big = listed.stream().filter(r -> r.getName().equals("big")).findFirst().orElseThrow();
            assertEquals("size > 10", ((SqlRuleFilter) big.getFilter()).getSqlExpression());
            assertEquals("SET kind = 'big'", ((SqlRuleAction) big.getAction()).getSqlExpression());
            RuleProperties urgent = listed.stream().filter(r -> r.getName().equals("urgent")).findFirst()
                .orElseThrow();
            assertEquals("urgent", ((CorrelationRuleFilter) urgent.getFilter()).getLabel());
        }
        try (ServiceBusSenderClient sender = b.sender().topicName("managed").buildClient()) {
            sender.sendMessage(msg("small", Map.of("size", 1)));
            sender.sendMessage(msg("large", Map.of("size", 20)));
            sender.sendMessage(new ServiceBusMessage("flagged").setSubject("urgent"));
        }
        try (ServiceBusReceiverClient r = b.receiver().topicName("managed").subscriptionName("rules").buildClient()) {
            List<ServiceBusReceivedMessage> got = Receive.n(r, 2);
            assertEquals(List.of("large", "flagged"), Receive.bodies(got));
            assertEquals("big", got.get(0).getApplicationProperties().get("kind"), "the created rule's action");
            for (ServiceBusReceivedMessage m : got) {
                r.complete(m);
            }
            assertEquals(List.of(), Receive.none(r, Duration.ofMillis(500)));
        }
    }

    private static ServiceBusMessage msg(String body, Map<String, Object> props) {
        ServiceBusMessage m = new ServiceBusMessage(body);
        m.getApplicationProperties().putAll(props);
        return m;
    }

    /** Receives n messages from the subscription, completes them, checks nothing else is there. */
    private static List<String> drain(ServiceBusClientBuilder b, String sub, int n) {
        try (ServiceBusReceiverClient r = b.receiver().topicName("events").subscriptionName(sub).buildClient()) {
            List<ServiceBusReceivedMessage> got = Receive.n(r, n);
            for (ServiceBusReceivedMessage m : got) {
                r.complete(m);
            }
            got.addAll(Receive.none(r, Duration.ofMillis(500)));
            return Receive.bodies(got);
        }
    }
}
