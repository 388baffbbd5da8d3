package emuconfig

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

func durationOf(ns int64) time.Duration { return time.Duration(ns) }

// ParseDuration parses an ISO-8601 duration such as "PT1M", "P14D",
// "PT0.5S" or .NET's TimeSpan.MaxValue "P10675199DT2H48M5.4775807S" into
// nanoseconds, saturating at the largest time.Duration.
func ParseDuration(s string) (int64, error) {
	orig := s
	if !strings.HasPrefix(s, "P") {
		return 0, fmt.Errorf("duration %q must start with P (ISO-8601, e.g. PT1M)", orig)
	}
	s = s[1:]
	var total float64
	inTime := false
	seen := false
	for len(s) > 0 {
		if s[0] == 'T' {
			if inTime {
				return 0, fmt.Errorf("duration %q has two T separators", orig)
			}
			inTime = true
			s = s[1:]
			continue
		}
		i := 0
		for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
			i++
		}
		if i == 0 || i == len(s) {
			return 0, fmt.Errorf("duration %q is not ISO-8601", orig)
		}
		n, err := strconv.ParseFloat(s[:i], 64)
		if err != nil {
			return 0, fmt.Errorf("duration %q: %v", orig, err)
		}
		var unit float64
		switch u := s[i]; {
		case u == 'D' && !inTime:
			unit = float64(24 * time.Hour)
		case u == 'W' && !inTime:
			unit = float64(7 * 24 * time.Hour)
		case u == 'H' && inTime:
			unit = float64(time.Hour)
		case u == 'M' && inTime:
			unit = float64(time.Minute)
		case u == 'S' && inTime:
			unit = float64(time.Second)
		default:
			return 0, fmt.Errorf("duration %q: unit %q is not supported (use D, W, H, M, S)", orig, u)
		}
		total += n * unit
		seen = true
		s = s[i+1:]
	}
	if !seen {
		return 0, fmt.Errorf("duration %q has no value", orig)
	}
	if total >= math.MaxInt64 {
		return math.MaxInt64, nil
	}
	return int64(total), nil
}
