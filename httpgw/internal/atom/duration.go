package atom

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// MaxDuration stands for .NET's TimeSpan.MaxValue, which Service Bus uses
// for "never" (DefaultMessageTimeToLive, AutoDeleteOnIdle). TimeSpan.MaxValue
// is about 29,000 years and does not fit a [time.Duration], so every
// duration at least as long as the largest time.Duration means "never".
const MaxDuration time.Duration = math.MaxInt64

// maxTimeSpan is how .NET writes TimeSpan.MaxValue as xs:duration.
const maxTimeSpan = "P10675199DT2H48M5.4775807S"

// errBadDuration is wrapped by every ParseDuration failure.
var errBadDuration = errors.New("atom: invalid xs:duration")

// FormatDuration writes d as an XML Schema duration the way .NET's
// XmlConvert does: days, hours, minutes and seconds, no years or months,
// fractional seconds without trailing zeros ("PT1M", "P14D", "PT1.5S",
// "PT0S"). [MaxDuration] becomes "P10675199DT2H48M5.4775807S".
func FormatDuration(d time.Duration) string {
	if d == MaxDuration || d == math.MinInt64 {
		if d < 0 {
			return "-" + maxTimeSpan
		}
		return maxTimeSpan
	}
	if d == 0 {
		return "PT0S"
	}
	var b strings.Builder
	if d < 0 {
		b.WriteByte('-')
		d = -d
	}
	b.WriteByte('P')
	day := 24 * time.Hour
	if days := d / day; days > 0 {
		b.WriteString(strconv.FormatInt(int64(days), 10) + "D")
		d -= days * day
	}
	if d == 0 {
		return b.String()
	}
	b.WriteByte('T')
	if h := d / time.Hour; h > 0 {
		b.WriteString(strconv.FormatInt(int64(h), 10) + "H")
		d -= h * time.Hour
	}
	if m := d / time.Minute; m > 0 {
		b.WriteString(strconv.FormatInt(int64(m), 10) + "M")
		d -= m * time.Minute
	}
	if d > 0 {
		sec, frac := d/time.Second, d%time.Second
		b.WriteString(strconv.FormatInt(int64(sec), 10))
		if frac > 0 {
			b.WriteString(strings.TrimRight(fmt.Sprintf(".%09d", int64(frac)), "0"))
		}
		b.WriteByte('S')
	}
	return b.String()
}

// ParseDuration parses an XML Schema duration such as "PT1M", "P14D",
// "PT0.5S" or "-P1DT2H". Like .NET, a year counts as 365 days and a month as
// 30 days; W (weeks) is accepted too. Only seconds may have a fraction
// (up to nanosecond precision; further digits are dropped). Durations too
// long for a [time.Duration], including .NET's TimeSpan.MaxValue, become
// [MaxDuration] (or its negation).
func ParseDuration(s string) (time.Duration, error) {
	in := s
	s = strings.TrimSpace(s)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	if !strings.HasPrefix(s, "P") || len(s) == 1 {
		return 0, fmt.Errorf("%w: %q", errBadDuration, in)
	}
	s = s[1:]
	var total sat
	inTime, any, timeAny := false, false, false
	order := "YMWD" // designators still allowed, in order
	for s != "" {
		if s[0] == 'T' {
			if inTime {
				return 0, fmt.Errorf("%w: %q", errBadDuration, in)
			}
			inTime, order, s = true, "HMS", s[1:]
			continue
		}
		i := 0
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
		intPart := s[:i]
		frac := ""
		if i < len(s) && s[i] == '.' {
			j := i + 1
			for j < len(s) && '0' <= s[j] && s[j] <= '9' {
				j++
			}
			frac, i = s[i+1:j], j
			if frac == "" {
				return 0, fmt.Errorf("%w: %q", errBadDuration, in)
			}
		}
		if intPart == "" || i >= len(s) {
			return 0, fmt.Errorf("%w: %q", errBadDuration, in)
		}
		des := s[i]
		k := strings.IndexByte(order, des)
		if k < 0 || (frac != "" && des != 'S') {
			return 0, fmt.Errorf("%w: %q", errBadDuration, in)
		}
		order = order[k+1:]
		total.add(intPart, unit(des, inTime))
		if frac != "" {
			total.addFraction(frac)
		}
		any = true
		timeAny = timeAny || inTime
		s = s[i+1:]
	}
	if !any || (inTime && !timeAny) {
		return 0, fmt.Errorf("%w: %q", errBadDuration, in)
	}
	d := total.duration()
	if neg {
		d = -d
	}
	return d, nil
}

// unit returns the length of one unit of the designator des.
func unit(des byte, inTime bool) time.Duration {
	day := 24 * time.Hour
	switch {
	case des == 'Y':
		return 365 * day
	case des == 'M' && !inTime:
		return 30 * day
	case des == 'W':
		return 7 * day
	case des == 'D':
		return day
	case des == 'H':
		return time.Hour
	case des == 'M':
		return time.Minute
	default:
		return time.Second
	}
}

// sat is a non-negative nanosecond count that saturates at MaxDuration.
type sat struct{ ns uint64 }

// add adds digits × unit.
func (t *sat) add(digits string, u time.Duration) {
	var n uint64
	for _, c := range []byte(digits) {
		if n > (math.MaxInt64-9)/10 {
			t.ns = math.MaxInt64
			return
		}
		n = n*10 + uint64(c-'0')
	}
	if n != 0 && n > math.MaxInt64/uint64(u) {
		t.ns = math.MaxInt64
		return
	}
	t.addNS(n * uint64(u))
}

// addFraction adds 0.digits seconds, keeping nanosecond precision.
func (t *sat) addFraction(digits string) {
	if len(digits) > 9 {
		digits = digits[:9]
	}
	n, _ := strconv.ParseUint(digits+strings.Repeat("0", 9-len(digits)), 10, 64)
	t.addNS(n)
}

func (t *sat) addNS(n uint64) {
	if t.ns+n > math.MaxInt64 || t.ns+n < t.ns {
		t.ns = math.MaxInt64
		return
	}
	t.ns += n
}

func (t *sat) duration() time.Duration { return time.Duration(t.ns) }
