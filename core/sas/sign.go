package sas

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/url"
	"strconv"
	"time"
)

// Sign mints a token for resource (for example "sb://localhost/q1" or
// "https://localhost:5300/q1?api-version=2021-05") signed with the named key,
// valid until expiry. The resource is encoded with [url.QueryEscape]
// (upper-case hex, like .NET), the field order is sr, sig, se, skn as in the
// docs. The key is used as UTF-8 text, not base64-decoded, like every SDK.
func Sign(resource, keyName, key string, expiry time.Time) string {
	sr := url.QueryEscape(resource)
	se := strconv.FormatInt(expiry.Unix(), 10)
	return tokenPrefix + " sr=" + sr +
		"&sig=" + url.QueryEscape(signature(key, sr, se)) +
		"&se=" + se +
		"&skn=" + url.QueryEscape(keyName)
}

// signature returns base64(HMAC-SHA256(key, sr + "\n" + se)) for the raw sr
// and se texts.
func signature(key, sr, se string) string {
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(sr))
	mac.Write([]byte{'\n'})
	mac.Write([]byte(se))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}
