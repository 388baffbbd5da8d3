package sas

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func validatorAt(t testing.TB, now time.Time, skew time.Duration, rules ...Rule) *Validator {
	t.Helper()
	v, err := NewValidator(Config{Rules: rules, ClockSkew: skew, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestValidateExpiry(t *testing.T) {
	rule := Rule{KeyName: "k", Key: "secret", Rights: Manage}
	tok := Sign("sb://h/q1", "k", "secret", t0)
	tests := []struct {
		name    string
		now     time.Time
		skew    time.Duration
		wantErr error
	}{
		{"before expiry", t0.Add(-time.Second), 0, nil},
		{"at expiry, default skew", t0, 0, nil},
		{"inside default skew", t0.Add(DefaultClockSkew - time.Second), 0, nil},
		{"end of default skew", t0.Add(DefaultClockSkew), 0, ErrExpiredToken},
		{"long expired", t0.Add(24 * time.Hour), 0, ErrExpiredToken},
		{"custom skew", t0.Add(50 * time.Second), time.Minute, nil},
		{"past custom skew", t0.Add(61 * time.Second), time.Minute, ErrExpiredToken},
		{"no skew, at expiry", t0, -1, ErrExpiredToken},
		{"no skew, before", t0.Add(-time.Second), -1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := validatorAt(t, tt.now, tt.skew, rule)
			_, err := v.Validate(tok, "q1", Send)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Validate at %v: %v, want %v", tt.now, err, tt.wantErr)
			}
		})
	}
	v := validatorAt(t, t0.Add(time.Hour), 0, rule)
	_, err := v.Validate(tok, "q1", Send)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %T is not *Error", err)
	}
	if want := "The token is expired. Expiration time: '2026-03-01 12:00:00Z'."; e.Detail != want {
		t.Errorf("Detail = %q, want %q", e.Detail, want)
	}
	if e.Reason() != "ExpiredToken" || e.SubCode() != 40106 {
		t.Errorf("Reason, SubCode = %q, %d", e.Reason(), e.SubCode())
	}
}

func TestValidateSignature(t *testing.T) {
	v := validatorAt(t, t0, 0, Rule{KeyName: "k", Key: "secret", SecondaryKey: "other", Rights: Manage})
	exp := t0.Add(time.Hour)
	good := Sign("sb://h/q1", "k", "secret", exp)
	tests := []struct {
		name    string
		token   string
		wantErr error
	}{
		{"primary", good, nil},
		{"secondary", Sign("sb://h/q1", "k", "other", exp), nil},
		{"wrong key", Sign("sb://h/q1", "k", "guess", exp), ErrInvalidSignature},
		{"unknown key name", Sign("sb://h/q1", "nobody", "secret", exp), ErrUnknownKey},
		{"tampered sr", strings.Replace(good, "q1", "q2", 1), ErrInvalidSignature},
		{"tampered sr case", strings.Replace(good, "q1", "Q1", 1), ErrInvalidSignature},
		{"tampered se", strings.Replace(good, "se=", "se=1", 1), ErrInvalidSignature},
		{"empty", "", ErrMissingToken},
		{"garbage", "SharedAccessSignature hello", ErrMalformedToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := v.Validate(tt.token, "q1", Listen)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Validate(%q): %v, want %v", tt.token, err, tt.wantErr)
			}
		})
	}
}

func TestValidateUnencodedSignature(t *testing.T) {
	// A client that forgets to URL-encode sig sends '+' and '/' raw.
	v := validatorAt(t, t0, 0, Rule{KeyName: "k", Key: "secret", Rights: Send})
	for i := range 200 {
		se := t0.Add(time.Duration(i+1) * time.Minute).Unix()
		sr := "sb%3a%2f%2fh%2fq1"
		sig := hmacB64("secret", sr, strconv.FormatInt(se, 10))
		if !strings.ContainsAny(sig, "+") {
			continue
		}
		tok := "SharedAccessSignature sr=" + sr + "&sig=" + sig + "&se=" + strconv.FormatInt(se, 10) + "&skn=k"
		if _, err := v.Validate(tok, "q1", Send); err != nil {
			t.Fatalf("raw signature %q refused: %v", sig, err)
		}
		return
	}
	t.Fatal("no signature with '+' found in 200 tries")
}

func TestValidateAudience(t *testing.T) {
	v := validatorAt(t, t0, 0, Rule{KeyName: "k", Key: "secret", Rights: Manage})
	exp := t0.Add(time.Hour)
	tests := []struct {
		resource, entity string
		ok               bool
	}{
		{"sb://h/q", "q", true},
		{"sb://h/q", "q2", false},
		{"sb://h/q", "Q", true},
		{"sb://h/q/", "q", true},
		{"sb://h/q", "/q/", true},
		{"sb://h/t", "t/Subscriptions/s", true},
		{"sb://h/t/subscriptions/s", "t/Subscriptions/s/$DeadLetterQueue", true},
		{"sb://h/t/subscriptions/s", "t/Subscriptions/s2", false},
		{"sb://h/t/subscriptions/s", "t", false},
		{"sb://h/q", "", false},
		{"sb://h", "anything/at/all", true},
		{"sb://other-host:9999/q", "q", true},
		{"https://h/q?api-version=2021-05", "q", true},
		{"https://h/q?x=/q2", "q2", false},
		{"sb://h/a/b", "a/bc", false},
	}
	for _, tt := range tests {
		_, err := v.Validate(Sign(tt.resource, "k", "secret", exp), tt.entity, Listen)
		if tt.ok && err != nil {
			t.Errorf("token for %q on %q: %v", tt.resource, tt.entity, err)
		}
		if !tt.ok && !errors.Is(err, ErrInvalidAudience) {
			t.Errorf("token for %q on %q: %v, want ErrInvalidAudience", tt.resource, tt.entity, err)
		}
	}
}

func TestValidateRights(t *testing.T) {
	exp := t0.Add(time.Hour)
	all := []Rights{Listen, Send, Manage}
	for _, have := range []Rights{Listen, Send, Manage, Send | Listen} {
		v := validatorAt(t, t0, 0, Rule{KeyName: "k", Key: "secret", Rights: have})
		tok := Sign("sb://h/q", "k", "secret", exp)
		for _, need := range all {
			got, err := v.Validate(tok, "q", need)
			if got != have.Effective() {
				t.Errorf("rule %v: returned rights %v, want %v", have, got, have.Effective())
			}
			if want := have.Has(need); (err == nil) != want {
				t.Errorf("rule %v need %v: err = %v, want allowed=%v", have, need, err, want)
			}
			if err != nil && !errors.Is(err, ErrInsufficientRights) {
				t.Errorf("rule %v need %v: %v, want ErrInsufficientRights", have, need, err)
			}
		}
	}
	v := validatorAt(t, t0, 0, Rule{KeyName: "k", Key: "secret", Rights: Listen})
	_, err := v.Validate(Sign("sb://h/q", "k", "secret", exp), "q", Send)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %T is not *Error", err)
	}
	if want := "Unauthorized access. 'Send' claim(s) are required to perform this operation."; e.Detail != want {
		t.Errorf("Detail = %q, want %q", e.Detail, want)
	}
	if e.Reason() != "Unauthorized" || e.SubCode() != 40100 {
		t.Errorf("Reason, SubCode = %q, %d", e.Reason(), e.SubCode())
	}
}

func TestValidateEntityRules(t *testing.T) {
	exp := t0.Add(time.Hour)
	v := validatorAt(t, t0, 0,
		Rule{KeyName: "root", Key: "ns-key", Rights: Manage},
		Rule{KeyName: "sender", Key: "q1-key", Rights: Send, Scope: "q1"},
		Rule{KeyName: "sender", Key: "q2-key", Rights: Send, Scope: "Q2"},
		Rule{KeyName: "topic", Key: "t-key", Rights: Listen, Scope: "/t/"},
	)
	tests := []struct {
		name, token, entity string
		need                Rights
		wantErr             error
	}{
		{"root anywhere", Sign("sb://h/", "root", "ns-key", exp), "q9", Manage, nil},
		{"entity rule on its entity", Sign("sb://h/q1", "sender", "q1-key", exp), "q1", Send, nil},
		{"same name other entity", Sign("sb://h/q2", "sender", "q2-key", exp), "q2", Send, nil},
		{"entity key on wrong entity", Sign("sb://h/q2", "sender", "q1-key", exp), "q2", Send, ErrInvalidSignature},
		{"namespace-wide sr, entity rule", Sign("sb://h", "sender", "q1-key", exp), "q1", Send, nil},
		{"entity rule outside scope", Sign("sb://h", "topic", "t-key", exp), "q1", Listen, ErrUnknownKey},
		{"topic rule covers subscription", Sign("sb://h/t", "topic", "t-key", exp), "t/Subscriptions/s", Listen, nil},
		{"topic rule lacks send", Sign("sb://h/t", "topic", "t-key", exp), "t", Send, ErrInsufficientRights},
		// A path that climbs out of a scope with a dot segment is outside
		// it, for the token's audience and for an entity rule alike,
		// escaped or not.
		{"audience q1 on q1/../orders", Sign("sb://h/q1", "root", "ns-key", exp), "q1/../orders", Send, ErrInvalidAudience},
		{"audience q1 on q1/%2e%2e/orders", Sign("sb://h/q1", "root", "ns-key", exp), "q1/%2e%2e/orders", Send, ErrInvalidAudience},
		{"audience q1 on q1/./orders", Sign("sb://h/q1", "root", "ns-key", exp), "/q1/./orders", Send, ErrInvalidAudience},
		{"audience q1/.. on q1/../orders", Sign("sb://h/q1/..", "root", "ns-key", exp), "q1/../orders", Send, ErrInvalidAudience},
		{"entity rule q1 on q1/../orders", Sign("sb://h/q1", "sender", "q1-key", exp), "q1/../orders", Send, ErrUnknownKey},
		{"entity rule q1 on q1/%2E%2E/orders", Sign("sb://h", "sender", "q1-key", exp), "q1/%2E%2E/orders", Send, ErrUnknownKey},
		{"token signed over q1/../orders itself", Sign("sb://h/q1/../orders", "root", "ns-key", exp), "q1/../orders", Send, nil},
		{"entity rule q1 signed over q1/../orders", Sign("sb://h/q1/../orders", "sender", "q1-key", exp), "q1/../orders", Send, ErrUnknownKey},
		{"namespace token on q1/../orders", Sign("sb://h/", "root", "ns-key", exp), "q1/../orders", Send, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := v.Validate(tt.token, tt.entity, tt.need)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Validate: %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestNewValidatorRejects(t *testing.T) {
	tests := []Config{
		{Rules: []Rule{{KeyName: "", Key: "x"}}},
		{Rules: []Rule{{KeyName: "k", Key: ""}}},
		{Rules: []Rule{{KeyName: "k", Key: "x", Rights: 0x80}}},
		{Rules: []Rule{{KeyName: "k", Key: "x"}, {KeyName: "k", Key: "y", Scope: "/"}}},
	}
	for _, cfg := range tests {
		if _, err := NewValidator(cfg); err == nil {
			t.Errorf("NewValidator(%+v) succeeded", cfg)
		}
	}
	v, err := NewValidator(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Validate(Sign("sb://h", "k", "x", time.Now().Add(time.Hour)), "q", Listen); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("zero Config validator accepted a token: %v", err)
	}
}

func TestAuthenticate(t *testing.T) {
	v := validatorAt(t, t0, 0,
		Rule{KeyName: "root", Key: "ns-key", SecondaryKey: "ns-key-2", Rights: Manage},
		Rule{KeyName: "sender", Key: "q1-key", Rights: Send, Scope: "q1"},
	)
	tests := []struct {
		name, key string
		want      Rights
		wantErr   error
	}{
		{"root", "ns-key", Manage, nil},
		{"root", "ns-key-2", Manage, nil},
		{"sender", "q1-key", Send, nil},
		{"root", "ns-key ", 0, ErrInvalidSignature},
		{"root", "", 0, ErrInvalidSignature},
		{"nobody", "ns-key", 0, ErrUnknownKey},
	}
	for _, tt := range tests {
		r, err := v.Authenticate(tt.name, tt.key)
		if !errors.Is(err, tt.wantErr) {
			t.Errorf("Authenticate(%q, %q): %v, want %v", tt.name, tt.key, err, tt.wantErr)
		}
		if r.Rights != tt.want {
			t.Errorf("Authenticate(%q, %q) rights = %v, want %v", tt.name, tt.key, r.Rights, tt.want)
		}
	}
	r, _ := v.Authenticate("sender", "q1-key")
	if !r.Covers("Q1") || r.Covers("q2") || r.Covers("") {
		t.Errorf("entity rule coverage wrong: %+v", r)
	}
}

func TestErrorReasons(t *testing.T) {
	tests := []struct {
		err     error
		reason  string
		subCode int
	}{
		{ErrMissingToken, "MissingToken", 40102},
		{ErrMalformedToken, "MalformedToken", 40105},
		{ErrUnknownKey, "InvalidSignature", 40103},
		{ErrInvalidSignature, "InvalidSignature", 40103},
		{ErrExpiredToken, "ExpiredToken", 40106},
		{ErrInvalidAudience, "InvalidAudience", 40104},
		{ErrInsufficientRights, "Unauthorized", 40100},
	}
	for _, tt := range tests {
		e := &Error{Err: tt.err, Detail: "d"}
		if e.Reason() != tt.reason || e.SubCode() != tt.subCode {
			t.Errorf("%v: Reason, SubCode = %q, %d; want %q, %d", tt.err, e.Reason(), e.SubCode(), tt.reason, tt.subCode)
		}
		if !errors.Is(e, tt.err) || e.Error() != tt.err.Error()+": d" {
			t.Errorf("%v: Error() = %q", tt.err, e.Error())
		}
	}
}

// TestSecretEqual: keys and signatures compare equal only when identical,
// whatever their lengths (the comparison hashes both first, so it takes
// the same time for any length).
func TestSecretEqual(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"SAS_KEY_VALUE", "SAS_KEY_VALUE", true},
		{"", "", true},
		{"SAS_KEY_VALUE", "SAS_KEY_VALUF", false},
		{"SAS_KEY_VALUE", "SAS_KEY_VALUE ", false},
		{"SAS_KEY_VALUE", "SAS", false},
		{"SAS_KEY_VALUE", "", false},
	} {
		if got := secretEqual(c.a, c.b); got != c.want {
			t.Errorf("secretEqual(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
