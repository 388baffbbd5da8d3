package core_test

import (
	"errors"
	"testing"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/sas"
)

// TestRoutedBrokerKnowsEntityRules: a routed broker's entity tables are
// empty; the SAS rules of a queue or topic come from the backend holding
// it, for a request path below the entity as for the entity, and for a
// SASL PLAIN key name. A name placed nowhere and a subscription give
// none; a group out of reach gives server busy (the rules are unknown,
// not absent).
func TestRoutedBrokerKnowsEntityRules(t *testing.T) {
	b, r := newRouted(t)
	ctx := t.Context()
	key := core.NewAccessKey()
	for _, e := range []core.Entity{
		{Kind: core.KindQueue, Name: "alpha", AuthorizationRules: []core.AuthorizationRule{{KeyName: "sender", PrimaryKey: key, Rights: sas.Send}}},
		{Kind: core.KindTopic, Name: "news", AuthorizationRules: []core.AuthorizationRule{{KeyName: "sender", PrimaryKey: key, Rights: sas.Listen}}},
		{Kind: core.KindSubscription, Topic: "news", Name: "all"},
		{Kind: core.KindQueue, Name: "zulu"},
	} {
		if _, err := b.CreateEntity(ctx, e); err != nil {
			t.Fatalf("create %s: %v", e.Path(), err)
		}
	}
	for path, want := range map[string]string{
		"alpha": "alpha", "alpha/messages/head": "alpha", "news/subscriptions/all/$deadletterqueue": "news",
		"zulu": "", "nowhere": "", "nowhere/messages": "",
	} {
		ar, err := b.AuthorizationRulesOn(path)
		if err != nil {
			t.Errorf("rules on %q: %v", path, err)
		}
		if ar.Path != want || (want != "") != (len(ar.Rules) == 1) {
			t.Errorf("rules on %q: %+v, want those of %q", path, ar, want)
		}
	}
	got, err := b.EntityAuthorizationRules("sender")
	if err != nil {
		t.Error(err)
	}
	if len(got) != 2 || got[0].Path != "alpha" || got[1].Path != "news" || got[1].Rules[0].Rights != sas.Listen.Effective() {
		t.Errorf("rules named sender: %+v, want alpha's and news's", got)
	}
	if got, _ := b.EntityAuthorizationRules("nobody"); len(got) != 0 {
		t.Errorf("rules named nobody: %+v", got)
	}
	r.mu.Lock()
	r.down = true
	r.mu.Unlock()
	if ar, err := b.AuthorizationRulesOn("alpha"); len(ar.Rules) != 0 || !errors.Is(err, core.ErrServerBusy) {
		t.Errorf("rules with the group out of reach: %+v, %v; want none and server busy", ar, err)
	}
}
