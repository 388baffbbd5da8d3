"""The Python administration client over HTTPS (trusting the local CA
through REQUESTS_CA_BUNDLE): queues, topics, subscriptions, rules and
runtime counts."""

import unittest

from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
from azure.servicebus import ServiceBusMessage
from azure.servicebus.management import ServiceBusAdministrationClient, SqlRuleFilter

import omnibus_env as env


class Admin(unittest.TestCase):
    def setUp(self):
        self.admin = ServiceBusAdministrationClient.from_connection_string(env.ADMIN_CONNECTION_STRING)
        self.addCleanup(self.admin.close)

    def test_queue_lifecycle_and_counts(self):
        q = self.admin.create_queue("py-admin-q", max_delivery_count=7, requires_session=False)
        self.addCleanup(lambda: self.admin.delete_queue("py-admin-q"))
        self.assertEqual(q.max_delivery_count, 7)
        with self.assertRaises(ResourceExistsError):
            self.admin.create_queue("py-admin-q")
        q.max_delivery_count = 9
        self.admin.update_queue(q)
        self.assertEqual(self.admin.get_queue("py-admin-q").max_delivery_count, 9)
        self.assertIn("py-admin-q", [x.name for x in self.admin.list_queues()])
        with env.client() as client, client.get_queue_sender("py-admin-q") as sender:
            sender.send_messages([ServiceBusMessage("1"), ServiceBusMessage("2")])
        self.assertEqual(self.admin.get_queue_runtime_properties("py-admin-q").active_message_count, 2)
        with self.assertRaises(ResourceNotFoundError):
            self.admin.get_queue("py-no-such-queue")

    def test_topic_subscription_rules(self):
        self.admin.create_topic("py-admin-t")
        self.addCleanup(lambda: self.admin.delete_topic("py-admin-t"))
        self.admin.create_subscription("py-admin-t", "s")
        self.admin.create_rule("py-admin-t", "s", "reds", filter=SqlRuleFilter("color = 'red'"))
        names = sorted(r.name for r in self.admin.list_rules("py-admin-t", "s"))
        self.assertEqual(names, ["$Default", "reds"])
        self.admin.delete_rule("py-admin-t", "s", "$Default")
        with env.client() as client:
            with client.get_topic_sender("py-admin-t") as sender:
                sender.send_messages([ServiceBusMessage("r", application_properties={"color": "red"}),
                                      ServiceBusMessage("b", application_properties={"color": "blue"})])
            with client.get_subscription_receiver("py-admin-t", "s") as receiver:
                [m] = env.receive(receiver, 1)
                self.assertEqual(str(m), "r")
                receiver.complete_message(m)
        props = self.admin.get_subscription_runtime_properties("py-admin-t", "s")
        self.assertEqual(props.active_message_count, 0)


if __name__ == "__main__":
    unittest.main()
