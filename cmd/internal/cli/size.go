package cli

import (
	"fmt"
	"strconv"
	"strings"
)

// ByteSize is a flag.Value for a number of bytes written with an optional
// unit: 256MiB, 1GiB, 500MB, 4096.
type ByteSize int64

// sizeUnits are the units ByteSize accepts, longest suffix first so that
// "MiB" is not read as "B".
var sizeUnits = []struct {
	suffix string
	factor int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40},
	{"B", 1},
}

// Set implements flag.Value. "auto" unsets the size.
func (s *ByteSize) Set(v string) error {
	if strings.TrimSpace(v) == "auto" {
		*s = -1
		return nil
	}
	num, factor := strings.TrimSpace(v), int64(1)
	for _, u := range sizeUnits {
		if rest, ok := strings.CutSuffix(num, u.suffix); ok {
			num, factor = strings.TrimSpace(rest), u.factor
			break
		}
	}
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || n < 0 || n*float64(factor) > 1<<62 {
		return fmt.Errorf("%q is not a size (a number of bytes, or with a unit: 256MiB, 1GiB, 500MB)", v)
	}
	*s = ByteSize(n * float64(factor))
	return nil
}

// String implements flag.Value. A negative size is unset: "auto".
func (s *ByteSize) String() string {
	if *s < 0 {
		return "auto"
	}
	return FormatSize(int64(*s))
}

// FormatSize prints n bytes in the largest binary unit that divides it.
func FormatSize(n int64) string {
	for _, u := range []struct {
		suffix string
		factor int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.factor && n%u.factor == 0 {
			return strconv.FormatInt(n/u.factor, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}
