package atom

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrInvalidBody is wrapped by every [DecodeEntry] failure: the body is
// not XML, not a description we know, or holds a value of the wrong form.
// The gateway answers it with 400.
var ErrInvalidBody = errors.New("atom: invalid request body")

// tick is the precision of a .NET DateTime or TimeSpan.
const tick = 100 * time.Nanosecond

// formatTime writes t as RFC 3339 in UTC with at most seven fractional
// digits. The zero time is written "0001-01-01T00:00:00Z".
func formatTime(t time.Time) string {
	return t.UTC().Truncate(tick).Format("2006-01-02T15:04:05.9999999Z07:00")
}

// formatEntryTime writes the whole-second timestamps of ATOM envelopes.
func formatEntryTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05Z07:00")
}

// parseTime reads an RFC 3339 timestamp, or one without a zone (Service
// Bus writes a never-accessed AccessedAt as "0001-01-01T00:00:00"), which
// is taken as UTC. The result is in UTC, truncated to a tick.
func parseTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t, err = time.Parse("2006-01-02T15:04:05.999999999", s)
	}
	if err != nil {
		return time.Time{}, err
	}
	return t.UTC().Truncate(tick), nil
}

// parseBool reads an xs:boolean: true/false in any case, or 1/0.
func parseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	}
	return false, fmt.Errorf("not a boolean: %q", s)
}

// fields converts the text of decoded elements into typed values. Every
// setter leaves the destination alone when the element was absent (nil),
// which is how missing elements keep their defaults; the first bad value is
// remembered in err together with its element name.
type fields struct{ err error }

func (f *fields) fail(name, value string, err error) {
	if f.err == nil {
		f.err = fmt.Errorf("%w: element %s: value %q: %v", ErrInvalidBody, name, value, err)
	}
}

// str copies free text (names, metadata, expressions) unchanged.
func (f *fields) str(dst *string, src *string) {
	if src != nil {
		*dst = *src
	}
}

// word copies an enumeration-like value without surrounding whitespace;
// an empty element keeps the default.
func (f *fields) word(dst *string, src *string) {
	if src != nil && strings.TrimSpace(*src) != "" {
		*dst = strings.TrimSpace(*src)
	}
}

func trim(s string) string { return strings.TrimSpace(s) }

func (f *fields) boolean(name string, dst *bool, src *string) {
	if src == nil {
		return
	}
	v, err := parseBool(*src)
	if err != nil {
		f.fail(name, *src, err)
		return
	}
	*dst = v
}

func (f *fields) int64(name string, dst *int64, src *string) {
	if src == nil {
		return
	}
	v, err := strconv.ParseInt(strings.TrimSpace(*src), 10, 64)
	if err != nil {
		f.fail(name, *src, err)
		return
	}
	*dst = v
}

func (f *fields) int32(name string, dst *int32, src *string) {
	if src == nil {
		return
	}
	v, err := strconv.ParseInt(strings.TrimSpace(*src), 10, 32)
	if err != nil {
		f.fail(name, *src, err)
		return
	}
	*dst = int32(v)
}

func (f *fields) duration(name string, dst *time.Duration, src *string) {
	if src == nil {
		return
	}
	v, err := ParseDuration(*src)
	if err != nil {
		f.fail(name, *src, err)
		return
	}
	*dst = v
}

func (f *fields) time(name string, dst *time.Time, src *string) {
	if src == nil || strings.TrimSpace(*src) == "" {
		return
	}
	v, err := parseTime(*src)
	if err != nil {
		f.fail(name, *src, err)
		return
	}
	*dst = v
}

// knownStatuses lists the statuses whose spelling is normalised on decode.
var knownStatuses = []EntityStatus{
	StatusActive, StatusCreating, StatusDeleting, StatusDisabled, StatusReceiveDisabled,
	StatusRenaming, StatusRestoring, StatusSendDisabled, StatusUnknown,
}

// status copies an entity status, fixing the case of known values; an
// empty element keeps the default.
func (f *fields) status(dst *EntityStatus, src *string) {
	if src == nil || trim(*src) == "" {
		return
	}
	s := trim(*src)
	for _, k := range knownStatuses {
		if strings.EqualFold(s, string(k)) {
			*dst = k
			return
		}
	}
	*dst = EntityStatus(s)
}
