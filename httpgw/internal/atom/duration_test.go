package atom

import (
	"testing"
	"time"
)

func TestFormatDuration(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "PT0S"},
		{time.Minute, "PT1M"},
		{30 * time.Second, "PT30S"},
		{45 * time.Second, "PT45S"},
		{10 * time.Minute, "PT10M"},
		{14 * 24 * time.Hour, "P14D"},
		{90 * time.Second, "PT1M30S"},
		{1500 * time.Millisecond, "PT1.5S"},
		{500 * time.Millisecond, "PT0.5S"},
		{time.Nanosecond, "PT0.000000001S"},
		{24*time.Hour + 2*time.Hour + 3*time.Minute + 4*time.Second, "P1DT2H3M4S"},
		{-time.Minute, "-PT1M"},
		{MaxDuration, "P10675199DT2H48M5.4775807S"},
	}
	for _, tt := range tests {
		if got := FormatDuration(tt.d); got != tt.want {
			t.Errorf("FormatDuration(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

func TestParseDuration(t *testing.T) {
	day := 24 * time.Hour
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"PT1M", time.Minute},
		{"PT45S", 45 * time.Second},
		{"P14D", 14 * day},
		{"PT10M", 10 * time.Minute},
		{" PT1M30S ", 90 * time.Second},
		{"PT0.5S", 500 * time.Millisecond},
		{"PT1.1234567891S", time.Second + 123456789},
		{"P1DT2H3M4.5S", day + 2*time.Hour + 3*time.Minute + 4500*time.Millisecond},
		{"P1Y", 365 * day},
		{"P1M", 30 * day},
		{"P2W", 14 * day},
		{"P1Y2M3DT4H5M6S", 365*day + 60*day + 3*day + 4*time.Hour + 5*time.Minute + 6*time.Second},
		{"PT0S", 0},
		{"P0D", 0},
		{"-PT1M", -time.Minute},
		{"PT36H", 36 * time.Hour},
		{"P10675199DT2H48M5.4775807S", MaxDuration},
		{"P99999999999999999999999D", MaxDuration},
		{"PT9223372036.854775807S", MaxDuration},
		{"PT9223372036.854775806S", MaxDuration - 1},
		{"-P10675199DT2H48M5.4775807S", -MaxDuration},
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestParseDurationErrors(t *testing.T) {
	for _, in := range []string{
		"", "P", "PT", "T1M", "1M", "PT1", "P1S", "PT1D", "P1.5D", "PT1.S",
		"PT.5S", "P1DT", "PT1M1H", "P1D1Y", "PT1S1S", "P-1D", "PTT1M", "pt1m", "P1DT1H ms",
	} {
		if d, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) = %v, want error", in, d)
		}
	}
}

func TestDurationRoundTrip(t *testing.T) {
	for _, d := range []time.Duration{
		0, 1, time.Second, 61 * time.Second, 25 * time.Hour, 7*24*time.Hour + 1,
		-3 * time.Hour, MaxDuration, MaxDuration - 1, -MaxDuration,
	} {
		s := FormatDuration(d)
		got, err := ParseDuration(s)
		if err != nil || got != d {
			t.Errorf("ParseDuration(FormatDuration(%d) = %q) = %d, %v", d, s, got, err)
		}
	}
}
