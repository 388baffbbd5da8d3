package conformance

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/omnibusmq/omnibus/core/sas"
)

// Entity names and property ranges (issue 31): management refuses with
// 400 what Service Bus documents refusing, and a path that climbs out of
// an entity with a ".." segment is not a way around a token's scope. The
// scenarios assert only what the service's documents and error texts
// show: the characters ('~' is refused with "contains character(s) that
// is not allowed by Service Bus"), the lengths (260 for a path, 50 for a
// subscription or rule: Service Bus quotas), the MaxSizeInMegabytes
// choices (Resource Manager exceptions: "The specified value 16384 is
// invalid. The property 'MaxSizeInMegabytes', must be one of the
// following values: 1024;2048;3072;4096;5120"). Whether the service
// resolves "a/../b" or names an entity so is not documented, so the scope
// scenario checks only that nothing reaches "b".

const namesDoc = "Azure naming rules for Microsoft.ServiceBus, Service Bus quotas:"

// refused400 checks that a management call failed with HTTP 400, cleaning
// up what it made if it did not.
func (t *T) refused400(what string, err error, cleanup func(context.Context)) {
	t.live()
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cleanup(ctx)
		t.Fatalf("%s was accepted, want 400", what)
	}
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusBadRequest {
		t.Fatalf("%s: %v, want HTTP 400", what, err)
	}
}

// mustCreate checks a management call succeeded and deletes what it made
// when the scenario ends.
func (t *T) mustCreate(what string, err error, cleanup func(context.Context)) {
	t.must(err, "%s", what)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cleanup(ctx)
	})
}

func init() {
	register(
		Scenario{Name: "names-characters-and-lengths", Seed: namesDoc + " a queue or topic path has letters, digits, '.', '-', '_' and '/', at most 260 characters; a subscription or rule name at most 50; others are refused with 400", Protocol: REST, Run: func(t *T) {
			if t.target.Predeclared {
				t.Skipf("needs runtime management")
			}
			a := t.target.admin
			base := "cf-names-" + suffix()
			deleteQueue := func(name string) func(context.Context) {
				return func(ctx context.Context) { _, _ = a.DeleteQueue(ctx, name, nil) }
			}

			t.Check("characters")
			for _, name := range []string{base + "~x", base + "+x", base + "/x~y"} {
				_, err := a.CreateQueue(t.ctx, name, nil)
				t.refused400("queue "+name, err, deleteQueue(name))
			}

			t.Check("path of 260 characters")
			long := base + "-" + strings.Repeat("p", 260-len(base)-1)
			_, err := a.CreateQueue(t.ctx, long, nil)
			t.mustCreate("a queue named with 260 characters", err, deleteQueue(long))
			_, err = a.CreateQueue(t.ctx, long+"q", nil)
			t.refused400("a queue named with 261 characters", err, deleteQueue(long+"q"))

			t.Check("subscription and rule names of 50 characters")
			topic := base + "-t"
			_, err = a.CreateTopic(t.ctx, topic, nil)
			t.mustCreate("topic "+topic, err, func(ctx context.Context) { _, _ = a.DeleteTopic(ctx, topic, nil) })
			sub := strings.Repeat("s", 50)
			_, err = a.CreateSubscription(t.ctx, topic, sub, nil)
			t.must(err, "a subscription named with 50 characters")
			_, err = a.CreateSubscription(t.ctx, topic, sub+"s", nil)
			t.refused400("a subscription named with 51 characters", err, func(ctx context.Context) { _, _ = a.DeleteSubscription(ctx, topic, sub+"s", nil) })
			_, err = a.CreateSubscription(t.ctx, topic, "s~1", nil)
			t.refused400("subscription s~1", err, func(ctx context.Context) { _, _ = a.DeleteSubscription(ctx, topic, "s~1", nil) })
			rule := strings.Repeat("r", 50)
			_, err = a.CreateRule(t.ctx, topic, sub, &admin.CreateRuleOptions{Name: to.Ptr(rule), Filter: &admin.TrueFilter{}})
			t.must(err, "a rule named with 50 characters")
			_, err = a.CreateRule(t.ctx, topic, sub, &admin.CreateRuleOptions{Name: to.Ptr(rule + "r"), Filter: &admin.TrueFilter{}})
			t.refused400("a rule named with 51 characters", err, func(ctx context.Context) { _, _ = a.DeleteRule(ctx, topic, sub, rule+"r", nil) })
		}},
		Scenario{Name: "names-max-size-choices", Seed: namesDoc + " MaxSizeInMegabytes must be one of 1024, 2048, 3072, 4096, 5120 (80 GB on Premium); another value is refused with 400 naming the property", Protocol: REST, Run: func(t *T) {
			if t.target.Predeclared {
				t.Skipf("needs runtime management")
			}
			a := t.target.admin
			for _, mb := range []int32{1, 1500, 16384, 2147483647} {
				name := "cf-size-" + suffix()
				_, err := a.CreateQueue(t.ctx, name, &admin.CreateQueueOptions{Properties: &admin.QueueProperties{MaxSizeInMegabytes: to.Ptr(mb)}})
				t.refused400(fmt.Sprintf("a queue of MaxSizeInMegabytes %d", mb), err, func(ctx context.Context) { _, _ = a.DeleteQueue(ctx, name, nil) })
				if !strings.Contains(err.Error(), "MaxSizeInMegabytes") {
					t.Errorf("the refusal of MaxSizeInMegabytes %d does not name the property: %v", mb, err)
				}
			}
			name := "cf-size-" + suffix()
			_, err := a.CreateTopic(t.ctx, name, &admin.CreateTopicOptions{Properties: &admin.TopicProperties{MaxSizeInMegabytes: to.Ptr[int32](2048)}})
			t.mustCreate("a topic of MaxSizeInMegabytes 2048", err, func(ctx context.Context) { _, _ = a.DeleteTopic(ctx, name, nil) })
		}},
		Scenario{Name: "names-dot-segments-stay-in-scope", Seed: namesDoc + " a token for a path authorizes the entities under it only (SAS); \"a/../c\" is no way out of a with a token for a, over AMQP or HTTP, whether or not the endpoint lets such a name be created", Protocol: Both, Run: func(t *T) {
			if t.target.Predeclared {
				t.Skipf("needs runtime management")
			}
			adm := t.target.admin
			sfx := suffix()
			a, c := "cf-scope-"+sfx, "cf-climbed-"+sfx
			inside, climb := a+"/q", a+"/../"+c
			deleteQueue := func(name string) func(context.Context) {
				return func(ctx context.Context) { _, _ = adm.DeleteQueue(ctx, name, nil) }
			}
			_, err := adm.CreateQueue(t.ctx, inside, nil)
			t.mustCreate("queue "+inside, err, deleteQueue(inside))
			// An endpoint that takes the name (omnibus did) must still keep
			// a's token out of it; one that resolves it makes c.
			if _, err := adm.CreateQueue(t.ctx, climb, nil); err == nil {
				t.Cleanup(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					deleteQueue(climb)(ctx)
					deleteQueue(c)(ctx)
				})
			}
			tokenA := sas.Sign("sb://"+t.target.cs.Host+"/"+a, t.target.cs.SharedAccessKeyName, t.target.cs.SharedAccessKey, time.Now().Add(time.Hour))
			cs := "Endpoint=sb://" + t.target.cs.Host + "/;SharedAccessSignature=" + tokenA
			if t.target.cs.UseDevelopmentEmulator {
				cs += ";UseDevelopmentEmulator=true"
			}
			client, err := azservicebus.NewClientFromConnectionString(cs, nil)
			t.must(err, "a client with a token for %s", a)
			t.Cleanup(func() { _ = client.Close(context.Background()) })
			sendWith := func(entity, body string) error {
				s, err := client.NewSender(entity, nil)
				if err != nil {
					return err
				}
				defer s.Close(context.Background())
				ctx, cancel := context.WithTimeout(t.ctx, 30*time.Second)
				defer cancel()
				return s.SendMessage(ctx, &azservicebus.Message{Body: []byte(body)}, nil)
			}

			t.Check("the token works under its path")
			t.must(sendWith(inside, "inside"), "sending to %s with a token for %s", inside, a)

			t.Check("refused over AMQP")
			for _, p := range []string{climb, a + "/./../" + c, a + "/q/../../" + c} {
				if err := sendWith(p, "climbed"); err == nil {
					t.Errorf("a send to %s with a token for %s was accepted", p, a)
				}
			}

			t.Check("refused over HTTP")
			for _, p := range []string{climb, a + "/%2e%2e/" + c, a + "/%2E%2E/" + c} {
				resp := t.RESTAuth(http.MethodPost, p+"/messages", []byte("climbed"), nil, t.target.token(a))
				if resp.StatusCode < 400 {
					t.Errorf("POST %s/messages with a token for %s: %d, want a refusal", p, a, resp.StatusCode)
				}
			}
		}},
	)
}
