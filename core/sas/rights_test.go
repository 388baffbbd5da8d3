package sas

import "testing"

func TestRightsHas(t *testing.T) {
	tests := []struct {
		have, need Rights
		want       bool
	}{
		{Manage, Manage, true},
		{Manage, Send, true},
		{Manage, Listen, true},
		{Manage, Send | Listen, true},
		{Manage, Manage | Send | Listen, true},
		{Send, Send, true},
		{Send, Listen, false},
		{Send, Manage, false},
		{Listen, Listen, true},
		{Listen, Send, false},
		{Listen, Manage, false},
		{Send | Listen, Send | Listen, true},
		{Send | Listen, Manage, false},
		{0, Listen, false},
		{0, 0, true},
		{Listen, 0, true},
	}
	for _, tt := range tests {
		if got := tt.have.Has(tt.need); got != tt.want {
			t.Errorf("%v.Has(%v) = %v, want %v", tt.have, tt.need, got, tt.want)
		}
	}
}

func TestRightsEffective(t *testing.T) {
	if got, want := Manage.Effective(), Manage|Send|Listen; got != want {
		t.Errorf("Manage.Effective() = %v, want %v", got, want)
	}
	if got, want := Send.Effective(), Send; got != want {
		t.Errorf("Send.Effective() = %v, want %v", got, want)
	}
	if got, want := Rights(0xF0|uint8(Listen)).Effective(), Listen; got != want {
		t.Errorf("Effective() kept unknown bits: %v", got)
	}
}

func TestParseRights(t *testing.T) {
	tests := []struct {
		in   []string
		want Rights
	}{
		{[]string{"Listen"}, Listen},
		{[]string{"send"}, Send},
		{[]string{"MANAGE"}, Manage},
		{[]string{"Manage", "Send", "Listen"}, Manage | Send | Listen},
		{[]string{"Manage, Send"}, Manage | Send},
		{[]string{"Listen|Send"}, Listen | Send},
		{[]string{" Listen "}, Listen},
		{nil, 0},
		{[]string{""}, 0},
	}
	for _, tt := range tests {
		got, err := ParseRights(tt.in...)
		if err != nil || got != tt.want {
			t.Errorf("ParseRights(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"Read", "Listen,Write", "ManageX"} {
		if r, err := ParseRights(bad); err == nil {
			t.Errorf("ParseRights(%q) = %v, want error", bad, r)
		}
	}
}

func TestRightsString(t *testing.T) {
	tests := []struct {
		r    Rights
		want string
	}{
		{0, "None"},
		{Listen, "Listen"},
		{Send, "Send"},
		{Manage, "Manage"},
		{Manage | Send | Listen, "Manage,Send,Listen"},
		{Send | Listen, "Send,Listen"},
	}
	for _, tt := range tests {
		if got := tt.r.String(); got != tt.want {
			t.Errorf("Rights(%d).String() = %q, want %q", tt.r, got, tt.want)
		}
		back, err := ParseRights(tt.r.String())
		if tt.r != 0 && (err != nil || back != tt.r) {
			t.Errorf("ParseRights(%q) = %v, %v; want %v", tt.r.String(), back, err, tt.r)
		}
	}
}
