package core_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/coretest"
	"github.com/omnibusmq/omnibus/core/sas"
)

const testKey = "0123456789abcdef0123456789abcdef0123456789a="

// A queue's authorization rules are kept, with generated keys where none
// was given and Manage widened to Send and Listen; bad rules are refused
// and change nothing.
func TestAuthorizationRules(t *testing.T) {
	env := coretest.New(t)
	q := core.Entity{Kind: core.KindQueue, Name: "q", AuthorizationRules: []core.AuthorizationRule{
		{KeyName: "sender", PrimaryKey: testKey, Rights: sas.Send},
		{KeyName: "admin", Rights: sas.Manage},
	}}
	got := env.MustCreate(t, q)
	if len(got.AuthorizationRules) != 2 {
		t.Fatalf("created with %d rules, want 2", len(got.AuthorizationRules))
	}
	s, a := got.AuthorizationRules[0], got.AuthorizationRules[1]
	if s.PrimaryKey != testKey || len(s.SecondaryKey) != 44 {
		t.Errorf("sender keys %q / %q: want the given primary and a generated 44-character secondary", s.PrimaryKey, s.SecondaryKey)
	}
	if a.Rights != sas.Manage|sas.Send|sas.Listen || a.PrimaryKey == a.SecondaryKey || len(a.PrimaryKey) != 44 {
		t.Errorf("admin rule %+v: want Manage,Send,Listen and two different generated keys", a)
	}

	for _, tc := range []struct {
		name  string
		rules []core.AuthorizationRule
		want  string
	}{
		{"short key", []core.AuthorizationRule{{KeyName: "k", PrimaryKey: "short", Rights: sas.Send}}, "is 5 characters long"},
		{"duplicate", []core.AuthorizationRule{{KeyName: "k", Rights: sas.Send}, {KeyName: "K", Rights: sas.Listen}}, "defined twice"},
		{"no rights", []core.AuthorizationRule{{KeyName: "k"}}, "has no rights"},
		{"bad name", []core.AuthorizationRule{{KeyName: "a@b", Rights: sas.Send}}, "may contain only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := *got
			e.AuthorizationRules = tc.rules
			_, err := env.Broker.UpdateEntity(t.Context(), e)
			if !errors.Is(err, core.ErrBadRequest) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("update with %s: %v, want a bad request saying %q", tc.name, err, tc.want)
			}
			now, _ := env.Broker.GetEntity("q")
			if len(now.AuthorizationRules) != 2 || now.AuthorizationRules[0].PrimaryKey != testKey {
				t.Errorf("a refused update changed the rules: %+v", now.AuthorizationRules)
			}
		})
	}

	sub := core.Entity{Kind: core.KindSubscription, Topic: "t", Name: "s",
		AuthorizationRules: []core.AuthorizationRule{{KeyName: "k", Rights: sas.Send}}}
	env.MustCreate(t, core.Entity{Kind: core.KindTopic, Name: "t"})
	if _, err := env.Broker.CreateEntity(t.Context(), sub); !errors.Is(err, core.ErrBadRequest) {
		t.Errorf("subscription with authorization rules: %v, want ErrBadRequest", err)
	}
}
