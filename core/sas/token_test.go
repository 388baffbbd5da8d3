package sas

import (
	"errors"
	"testing"
	"time"
)

func TestParseFieldOrderAndCase(t *testing.T) {
	want := Token{
		Resource:     "sb%3a%2f%2flocalhost%2fq1",
		Signature:    "abc+/=",
		RawSignature: "abc%2B%2F%3D",
		Expiry:       "1700000000",
		KeyName:      "RootManageSharedAccessKey",
	}
	tokens := []string{
		"SharedAccessSignature sr=sb%3a%2f%2flocalhost%2fq1&sig=abc%2B%2F%3D&se=1700000000&skn=RootManageSharedAccessKey",
		"SharedAccessSignature sig=abc%2B%2F%3D&se=1700000000&skn=RootManageSharedAccessKey&sr=sb%3a%2f%2flocalhost%2fq1",
		"sharedaccesssignature SR=sb%3a%2f%2flocalhost%2fq1&SIG=abc%2B%2F%3D&Se=1700000000&SKN=RootManageSharedAccessKey",
		"  SharedAccessSignature   sr=sb%3a%2f%2flocalhost%2fq1 & sig=abc%2B%2F%3D & se=1700000000 & skn=RootManageSharedAccessKey  ",
		"SharedAccessSignature sr=sb%3a%2f%2flocalhost%2fq1&sig=abc%2B%2F%3D&se=1700000000&skn=RootManageSharedAccessKey&",
		"SharedAccessSignature sr=sb%3a%2f%2flocalhost%2fq1&sig=abc%2B%2F%3D&extra=1&se=1700000000&skn=RootManageSharedAccessKey",
	}
	for _, tok := range tokens {
		got, err := Parse(tok)
		if err != nil {
			t.Errorf("Parse(%q): %v", tok, err)
			continue
		}
		if *got != want {
			t.Errorf("Parse(%q) = %+v, want %+v", tok, *got, want)
		}
	}
}

func TestParseDecodesKeyName(t *testing.T) {
	// JS encodes skn with encodeURIComponent.
	tok, err := Parse("SharedAccessSignature sr=a&sig=b&se=1&skn=my%20key")
	if err != nil {
		t.Fatal(err)
	}
	if tok.KeyName != "my key" {
		t.Errorf("KeyName = %q, want %q", tok.KeyName, "my key")
	}
	if got, want := tok.ExpiresAt(), time.Unix(1, 0).UTC(); !got.Equal(want) {
		t.Errorf("ExpiresAt = %v, want %v", got, want)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		token string
		want  error
	}{
		{"", ErrMissingToken},
		{"   ", ErrMissingToken},
		{"Bearer abc", ErrMalformedToken},
		{"SharedAccessSignature", ErrMalformedToken},
		{"SharedAccessSignaturesr=a&sig=b&se=1&skn=k", ErrMalformedToken},
		{"SharedAccessSignature sig=b&se=1&skn=k", ErrMalformedToken},
		{"SharedAccessSignature sr=a&se=1&skn=k", ErrMalformedToken},
		{"SharedAccessSignature sr=a&sig=b&skn=k", ErrMalformedToken},
		{"SharedAccessSignature sr=a&sig=b&se=1", ErrMalformedToken},
		{"SharedAccessSignature sr=a&sig=b&se=soon&skn=k", ErrMalformedToken},
		{"SharedAccessSignature sr=a&sig=b&se=1.5&skn=k", ErrMalformedToken},
		{"SharedAccessSignature sr=a&sr=a&sig=b&se=1&skn=k", ErrMalformedToken},
		{"SharedAccessSignature sr=a&sig=b&se=1&skn=k&novalue", ErrMalformedToken},
		{"SharedAccessSignature sr=&sig=b&se=1&skn=k", ErrMalformedToken},
		{"SharedAccessSignature sr=a&sig=%zz&se=1&skn=k", ErrMalformedToken},
		{"SharedAccessSignature sr=a&sig=b&se=1&skn=%zz", ErrMalformedToken},
	}
	for _, tt := range tests {
		_, err := Parse(tt.token)
		if !errors.Is(err, tt.want) {
			t.Errorf("Parse(%q) error = %v, want %v", tt.token, err, tt.want)
		}
		var e *Error
		if err != nil && !errors.As(err, &e) {
			t.Errorf("Parse(%q) error %T is not *Error", tt.token, err)
		}
	}
}

func TestAudience(t *testing.T) {
	tests := []struct{ sr, want string }{
		{"sb%3A%2F%2Flocalhost%2Fq1", "q1"},
		{"sb%3a%2f%2flocalhost%2fq1%2f", "q1"},
		{"http%3a%2f%2flocalhost%2fQ1", "q1"},
		{"https%3a%2f%2flocalhost%3a443%2fq1%3fapi-version%3d2017-04%26timeout%3d60", "q1"},
		{"amqp%3a%2f%2flocalhost%2ft%2fSubscriptions%2fs%2f%24management", "t/subscriptions/s/$management"},
		{"https%3a%2f%2flocalhost%2f%2524Resources%2fQueues", "$resources/queues"},
		{"sb%3a%2f%2flocalhost", ""},
		{"sb%3a%2f%2flocalhost%2f", ""},
		{"localhost%3a5300", ""},
		{"localhost%2fq1", "q1"},
		{"sbemulatorns.servicebus.windows.net", ""},
		{"your-namespace", ""},
		{"sb://localhost/a/b", "a/b"},
	}
	for _, tt := range tests {
		tok := &Token{Resource: tt.sr}
		got, err := tok.Audience()
		if err != nil || got != tt.want {
			t.Errorf("Audience(%q) = %q, %v; want %q", tt.sr, got, err, tt.want)
		}
	}
	if _, err := (&Token{Resource: "sb%zz"}).Audience(); !errors.Is(err, ErrMalformedToken) {
		t.Errorf("Audience of bad escape: %v, want ErrMalformedToken", err)
	}
}

func TestCovers(t *testing.T) {
	tests := []struct {
		scope, entity string
		want          bool
	}{
		{"", "", true},
		{"", "q1", true},
		{"q", "q", true},
		{"q", "q/subscriptions/s", true},
		{"q", "q2", false},
		{"q2", "q", false},
		{"a/b", "a/bc", false},
		{"a/b", "a/b/c", true},
		{"q1", "", false},
		// Dot segments leave the scope they start in: only the namespace
		// covers them.
		{"a", "a/../orders", false},
		{"a", "a/./orders", false},
		{"a", "a/b/..", false},
		{"a/..", "a/../orders", false},
		{"a/../orders", "a/../orders", true},
		{"a", "a/...", true},
		{"a", "a/.b", true},
		{"", "a/../orders", true},
	}
	for _, tt := range tests {
		if got := Covers(tt.scope, tt.entity); got != tt.want {
			t.Errorf("Covers(%q, %q) = %v, want %v", tt.scope, tt.entity, got, tt.want)
		}
	}
}

func TestNormalizePath(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"/", ""},
		{"/Q1/", "q1"},
		{"t//Subscriptions/S", "t/subscriptions/s"},
		{"%24Resources/Queues", "$resources/queues"},
		{"bad%zz", "bad%zz"},
	}
	for _, tt := range tests {
		if got := NormalizePath(tt.in); got != tt.want {
			t.Errorf("NormalizePath(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzParse checks that Parse never panics, that what it accepts has all
// fields, and that tokens minted by Sign always parse back.
func FuzzParse(f *testing.F) {
	f.Add("SharedAccessSignature sr=sb%3a%2f%2flocalhost%2fq1&sig=abc%3D&se=1700000000&skn=k")
	f.Add("SharedAccessSignature sig=a&se=1&skn=k&sr=b")
	f.Add("sharedaccesssignature SR=x&&sig=%2B&se=-5&skn=k&")
	f.Add("")
	f.Add("SharedAccessSignature =&=&&")
	f.Fuzz(func(t *testing.T, s string) {
		if tok, err := Parse(s); err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse(%q) error %T is not *Error", s, err)
			}
		} else {
			if tok.Resource == "" || tok.Signature == "" || tok.KeyName == "" || tok.Expiry == "" {
				t.Fatalf("Parse(%q) accepted empty fields: %+v", s, tok)
			}
			_, _ = tok.Audience()
			_ = tok.ExpiresAt()
		}

		// Whatever the resource and key name, a minted token parses back
		// and verifies.
		if s == "" {
			return
		}
		exp := time.Unix(1700000000, 0)
		minted := Sign("sb://h/"+s, s, "key", exp)
		back, err := Parse(minted)
		if err != nil {
			t.Fatalf("Parse(Sign(%q)) = %v", s, err)
		}
		if back.KeyName != s || back.Expiry != "1700000000" {
			t.Fatalf("Parse(Sign(%q)) = %+v", s, back)
		}
		v, err := NewValidator(Config{
			Rules: []Rule{{KeyName: s, Key: "key", Rights: Listen}},
			Now:   func() time.Time { return exp.Add(-time.Hour) },
		})
		if err != nil {
			t.Fatal(err)
		}
		aud, err := back.Audience()
		if err != nil {
			t.Fatalf("Audience of minted %q: %v", minted, err)
		}
		if _, err := v.Validate(minted, aud, Listen); err != nil {
			t.Fatalf("Validate(%q, %q): %v", minted, aud, err)
		}
	})
}
