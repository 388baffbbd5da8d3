package sas

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"
)

// The helpers below re-create, in test code, the ways the SDKs build
// tokens (amqp.md §2.6, rest.md §3.1), so Validate is tested against the
// exact texts real clients send rather than only against Sign.

const (
	testKeyName = "RootManageSharedAccessKey"
	testKey     = "SAS_KEY_VALUE"
)

func hmacB64(key, sr, se string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(sr + "\n" + se))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// goToken is azservicebus internal/sas Signer.SignWithExpiry: the whole
// escaped resource is lower-cased, sig is QueryEscaped, skn raw.
func goToken(uri, keyName, key, se string) string {
	sr := strings.ToLower(url.QueryEscape(uri))
	return fmt.Sprintf("SharedAccessSignature sr=%s&sig=%s&se=%s&skn=%s", sr, url.QueryEscape(hmacB64(key, sr, se)), se, keyName)
}

// encodeURIComponent is JavaScript's function of that name.
func encodeURIComponent(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			strings.IndexByte("-_.!~*'()", c) >= 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// jsAMQPToken is @azure/core-amqp createToken: encodeURIComponent keeps the
// case, field order sr, sig, se, skn, skn encoded too.
func jsAMQPToken(audience, keyName, key, se string) string {
	sr := encodeURIComponent(audience)
	return fmt.Sprintf("SharedAccessSignature sr=%s&sig=%s&se=%s&skn=%s", sr, encodeURIComponent(hmacB64(key, sr, se)), se, encodeURIComponent(keyName))
}

// jsATOMToken is @azure/service-bus sasServiceClientCredentials: the full
// request URL lower-cased, encoded, lower-cased again; order sig, se, skn, sr.
func jsATOMToken(requestURL, keyName, key, se string) string {
	sr := strings.ToLower(encodeURIComponent(strings.ToLower(requestURL)))
	return fmt.Sprintf("SharedAccessSignature sig=%s&se=%s&skn=%s&sr=%s", encodeURIComponent(hmacB64(key, sr, se)), se, keyName, sr)
}

// dotnetToken is Azure.Messaging.ServiceBus SharedAccessSignature:
// WebUtility.UrlEncode (upper-case hex).
func dotnetToken(uri, keyName, key, se string) string {
	sr := url.QueryEscape(uri)
	return fmt.Sprintf("SharedAccessSignature sr=%s&sig=%s&se=%s&skn=%s", sr, url.QueryEscape(hmacB64(key, sr, se)), se, keyName)
}

// phpToken is the PHP sample in the SAS docs: strtolower(rawurlencode(strtolower(uri))).
func phpToken(uri, keyName, key, se string) string {
	sr := strings.ToLower(strings.ReplaceAll(url.PathEscape(strings.ToLower(uri)), "/", "%2f"))
	sr = strings.ReplaceAll(sr, ":", "%3a")
	return fmt.Sprintf("SharedAccessSignature sr=%s&sig=%s&se=%s&skn=%s", sr, url.QueryEscape(hmacB64(key, sr, se)), se, keyName)
}

// The vectors in amqp.md §2.6 were computed with the SDKs' own algorithms.
func TestSpecVectors(t *testing.T) {
	v := newTestValidator(t, time.Unix(1700000000-60, 0))
	tests := []struct {
		token, entity string
	}{
		{"SharedAccessSignature sr=amqp%3a%2f%2flocalhost%2fmyqueue&sig=kNYs3MpANbLA7qL2kRwrfHKa3yLA%2BH4KnistpCGII28%3D&se=1700000000&skn=RootManageSharedAccessKey", "myqueue"},
		{"SharedAccessSignature sr=sb%3A%2F%2Flocalhost%2Fmyqueue%2F%24management&sig=to8P%2Fgpd4deMERkMQMSixkDgpj0C7BHqrbZDwUBipHw%3D&se=1700000000&skn=RootManageSharedAccessKey", "myqueue/$management"},
	}
	for _, tt := range tests {
		if _, err := v.Validate(tt.token, tt.entity, Manage); err != nil {
			t.Errorf("Validate(%q): %v", tt.token, err)
		}
	}
	// The helpers agree with the vectors.
	if got, want := goToken("amqp://localhost/myqueue", testKeyName, testKey, "1700000000"), tests[0].token; got != want {
		t.Errorf("goToken = %q, want %q", got, want)
	}
	if got, want := jsAMQPToken("sb://localhost/myqueue/$management", testKeyName, testKey, "1700000000"), tests[1].token; got != want {
		t.Errorf("jsAMQPToken = %q, want %q", got, want)
	}
}

func TestValidateSDKShapes(t *testing.T) {
	now := time.Unix(1700000000, 0)
	se := "1700003600"
	v := newTestValidator(t, now)
	tests := []struct {
		name, token, entity string
	}{
		{"go amqp", goToken("amqp://localhost/q1", testKeyName, testKey, se), "q1"},
		{"go amqps port", goToken("amqps://localhost:5671/q1", testKeyName, testKey, se), "Q1"},
		{"go atom", goToken("https://localhost:5300/q1?api-version=2024-05", testKeyName, testKey, se), "q1"},
		{"go atom list", goToken("https://localhost/$Resources/Queues?%24skip=0&%24top=100&api-version=2024-05", testKeyName, testKey, se), "$Resources/Queues"},
		{"go sas conn string", goToken("localhost:5300", testKeyName, testKey, se), "q1"},
		{"js amqp", jsAMQPToken("sb://localhost/q1", testKeyName, testKey, se), "q1"},
		{"js amqp sub mgmt", jsAMQPToken("sb://localhost/t1/Subscriptions/s1/$management", testKeyName, testKey, se), "t1/subscriptions/s1/$management"},
		{"js atom", jsATOMToken("https://localhost:443/t1/Subscriptions/s1?api-version=2021-05", testKeyName, testKey, se), "t1/Subscriptions/s1"},
		{"dotnet", dotnetToken("sb://localhost/q1/", testKeyName, testKey, se), "q1"},
		{"dotnet http", dotnetToken("http://localhost/q1", testKeyName, testKey, se), "q1"},
		{"php", phpToken("https://localhost/Q1", testKeyName, testKey, se), "q1"},
		{"namespace root", dotnetToken("sb://localhost", testKeyName, testKey, se), "t1/subscriptions/s1"},
		{"namespace root slash", dotnetToken("sb://localhost/", testKeyName, testKey, se), "q1"},
		{"scheme-less host", dotnetToken("sbemulatorns.servicebus.windows.net", testKeyName, testKey, se), "q1"},
		{"minted", Sign("sb://localhost/q1", testKeyName, testKey, now.Add(time.Hour)), "q1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := v.Validate(tt.token, tt.entity, Manage)
			if err != nil {
				t.Fatalf("Validate(%q, %q): %v", tt.token, tt.entity, err)
			}
			if got != Manage|Send|Listen {
				t.Errorf("rights = %v, want all", got)
			}
		})
	}
}

func newTestValidator(t testing.TB, now time.Time) *Validator {
	t.Helper()
	v, err := NewValidator(Config{
		Rules: []Rule{{KeyName: testKeyName, Key: testKey, Rights: Manage}},
		Now:   func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}
