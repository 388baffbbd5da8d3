package sas

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// ErrInvalidConnectionString is wrapped by every [ParseConnectionString]
// failure.
var ErrInvalidConnectionString = errors.New("sas: invalid connection string")

// ConnectionString is a parsed Service Bus connection string such as
//
//	Endpoint=sb://localhost;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;
type ConnectionString struct {
	// Endpoint is the Endpoint value as given, e.g. "sb://localhost:5672/".
	Endpoint string
	// Host is the endpoint's host with its port if one was given
	// ("localhost:5672"); the Go SDK calls it the fully qualified namespace.
	Host string
	// SharedAccessKeyName and SharedAccessKey name and hold a key.
	SharedAccessKeyName string
	SharedAccessKey     string
	// SharedAccessSignature is a ready-made token used instead of a key.
	SharedAccessSignature string
	// EntityPath names one queue or topic the string is limited to.
	EntityPath string
	// UseDevelopmentEmulator selects plain TCP/HTTP, as the SDKs do.
	UseDevelopmentEmulator bool
}

// ParseConnectionString parses a connection string of ';'-separated
// key=value pairs. Keys are case-insensitive and surrounding whitespace is
// ignored, empty segments (a trailing ';') are skipped, a value may contain
// '=' (base64 keys end with it), and unknown keys (TransportType, ...) are
// ignored. Endpoint must be an absolute URL with a host; with
// UseDevelopmentEmulator it must use the sb scheme. A key name needs a key,
// and either a key or a SharedAccessSignature is required.
func ParseConnectionString(s string) (ConnectionString, error) {
	var cs ConnectionString
	seen := make(map[string]bool)
	for part := range strings.SplitSeq(s, ";") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		key, value, ok := strings.Cut(part, "=")
		if !ok {
			return ConnectionString{}, fmt.Errorf("%w: segment %q has no '='", ErrInvalidConnectionString, strings.TrimSpace(part))
		}
		key, value = strings.ToLower(strings.TrimSpace(key)), strings.TrimSpace(value)
		if seen[key] {
			return ConnectionString{}, fmt.Errorf("%w: key %q appears twice", ErrInvalidConnectionString, key)
		}
		seen[key] = true
		switch key {
		case "endpoint":
			cs.Endpoint = value
		case "sharedaccesskeyname":
			cs.SharedAccessKeyName = value
		case "sharedaccesskey":
			cs.SharedAccessKey = value
		case "sharedaccesssignature":
			cs.SharedAccessSignature = value
		case "entitypath":
			cs.EntityPath = value
		case "usedevelopmentemulator":
			b, err := strconv.ParseBool(strings.ToLower(value))
			if err != nil {
				return ConnectionString{}, fmt.Errorf("%w: UseDevelopmentEmulator=%q is not a boolean", ErrInvalidConnectionString, value)
			}
			cs.UseDevelopmentEmulator = b
		}
	}
	if err := cs.validate(); err != nil {
		return ConnectionString{}, err
	}
	return cs, nil
}

// validate checks the endpoint and credentials and fills Host.
func (cs *ConnectionString) validate() error {
	if cs.Endpoint == "" {
		return fmt.Errorf("%w: Endpoint is required", ErrInvalidConnectionString)
	}
	u, err := url.Parse(cs.Endpoint)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return fmt.Errorf("%w: Endpoint %q is not an absolute URL such as sb://host", ErrInvalidConnectionString, cs.Endpoint)
	}
	if cs.UseDevelopmentEmulator && !strings.EqualFold(u.Scheme, "sb") {
		return fmt.Errorf("%w: UseDevelopmentEmulator needs an sb://host[:port] Endpoint, not %q", ErrInvalidConnectionString, cs.Endpoint)
	}
	cs.Host = u.Host
	switch {
	case cs.SharedAccessSignature != "":
	case cs.SharedAccessKeyName == "":
		return fmt.Errorf("%w: SharedAccessKeyName or SharedAccessSignature is required", ErrInvalidConnectionString)
	case cs.SharedAccessKey == "":
		return fmt.Errorf("%w: SharedAccessKey is required with SharedAccessKeyName", ErrInvalidConnectionString)
	}
	return nil
}

// String formats the connection string with the canonical key names,
// omitting empty fields, ready for an SDK.
func (cs ConnectionString) String() string {
	var b strings.Builder
	add := func(k, v string) {
		if v != "" {
			b.WriteString(k + "=" + v + ";")
		}
	}
	add("Endpoint", cs.Endpoint)
	add("SharedAccessKeyName", cs.SharedAccessKeyName)
	add("SharedAccessKey", cs.SharedAccessKey)
	add("SharedAccessSignature", cs.SharedAccessSignature)
	add("EntityPath", cs.EntityPath)
	if cs.UseDevelopmentEmulator {
		add("UseDevelopmentEmulator", "true")
	}
	return strings.TrimSuffix(b.String(), ";")
}
