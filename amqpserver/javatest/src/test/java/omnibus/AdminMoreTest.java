package omnibus;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.messaging.servicebus.administration.ServiceBusAdministrationClient;
import com.azure.messaging.servicebus.administration.models.CreateQueueOptions;
import com.azure.messaging.servicebus.administration.models.NamespaceProperties;
import com.azure.messaging.servicebus.administration.models.RuleProperties;
import com.azure.messaging.servicebus.administration.models.SqlRuleAction;
import com.azure.messaging.servicebus.administration.models.SqlRuleFilter;
import com.azure.messaging.servicebus.administration.models.SubscriptionProperties;
import com.azure.messaging.servicebus.administration.models.SubscriptionRuntimeProperties;
import com.azure.messaging.servicebus.administration.models.TopicProperties;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/** More of the administration client: namespace, updates of subscriptions and rules, runtime counts, forwarding. */
@Timeout(60)
class AdminMoreTest {
    @RegisterExtension
    static final OmnibusExtension omnibus = new OmnibusExtension(new Entities().queue("forward-target"));

    @Test
    void namespacePropertiesAreReported() {
        NamespaceProperties ns = omnibus.broker().admin().buildClient().getNamespaceProperties();
        assertEquals("sbemulatorns", ns.getName(), "the Config.json's namespace");
        assertNotNull(ns.getMessagingSku());
        assertNotNull(ns.getCreatedTime());
    }

    @Test
    void subscriptionsAndRulesAreUpdatedAndCounted() {
        ServiceBusAdministrationClient admin = omnibus.broker().admin().buildClient();
        TopicProperties topic = admin.createTopic("upd-topic");
        admin.createSubscription("upd-topic", "s1");
        admin.createSubscription("upd-topic", "s2");
        List<String> topics = new ArrayList<>();
        admin.listTopics().forEach(t -> topics.add(t.getName()));
        assertTrue(topics.contains("upd-topic"), "topics " + topics);
        List<String> subs = new ArrayList<>();
        admin.listSubscriptions("upd-topic").forEach(s -> subs.add(s.getSubscriptionName()));
        assertEquals(List.of("s1", "s2"), subs);

        SubscriptionProperties s1 = admin.getSubscription("upd-topic", "s1");
        s1.setMaxDeliveryCount(3);
        admin.updateSubscription(s1);
        assertEquals(3, admin.getSubscription("upd-topic", "s1").getMaxDeliveryCount());

        RuleProperties rule = admin.getRule("upd-topic", "s2", "$Default");
        rule.setFilter(new SqlRuleFilter("n > 1"));
        rule.setAction(new SqlRuleAction("SET seen = 'yes'"));
        admin.updateRule("upd-topic", "s2", rule);
        RuleProperties got = admin.getRule("upd-topic", "s2", "$Default");
        assertEquals("n > 1", ((SqlRuleFilter) got.getFilter()).getSqlExpression());

        try (ServiceBusSenderClient sender = omnibus.broker().client().sender().topicName("upd-topic").buildClient()) {
            ServiceBusMessage small = new ServiceBusMessage("small");
            small.getApplicationProperties().put("n", 1);
            ServiceBusMessage big = new ServiceBusMessage("big");
            big.getApplicationProperties().put("n", 5);
            sender.sendMessages(List.of(small, big));
        }
        SubscriptionRuntimeProperties rt1 = admin.getSubscriptionRuntimeProperties("upd-topic", "s1");
        SubscriptionRuntimeProperties rt2 = admin.getSubscriptionRuntimeProperties("upd-topic", "s2");
        assertEquals(2, rt1.getActiveMessageCount());
        assertEquals(1, rt2.getActiveMessageCount(), "the updated rule let one through");
        try (ServiceBusReceiverClient r = omnibus.broker().client().receiver().topicName("upd-topic")
            .subscriptionName("s2").buildClient()) {
            ServiceBusReceivedMessage m = Receive.n(r, 1).get(0);
            assertEquals("yes", m.getApplicationProperties().get("seen"), "the updated rule's action");
            r.complete(m);
        }
        admin.deleteTopic(topic.getName());
    }

    @Test
    void aQueueCreatedWithForwardToForwards() {
        ServiceBusAdministrationClient admin = omnibus.broker().admin().buildClient();
        admin.createQueue("forwarder", new CreateQueueOptions().setForwardTo("forward-target"));
        assertEquals("forward-target", admin.getQueue("forwarder").getForwardTo().replaceAll(".*/", ""));
        ServiceBusClientBuilder b = omnibus.broker().client();
        try (ServiceBusSenderClient sender = b.sender().queueName("forwarder").buildClient();
            ServiceBusReceiverClient r = b.receiver().queueName("forward-target").buildClient()) {
            sender.sendMessage(new ServiceBusMessage("passed on"));
            ServiceBusReceivedMessage m = Receive.n(r, 1).get(0);
            assertEquals("passed on", m.getBody().toString());
            r.complete(m);
        }
    }
}
