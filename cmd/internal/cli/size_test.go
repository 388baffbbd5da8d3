package cli

import "testing"

func TestByteSize(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "4096": 4096, "256MiB": 256 << 20, "1GiB": 1 << 30, "1.5GiB": 3 << 29,
		"500MB": 500e6, "64M": 64 << 20, "10 KiB": 10 << 10, "7B": 7,
	} {
		var s ByteSize
		if err := s.Set(in); err != nil || int64(s) != want {
			t.Errorf("Set(%q) = %d, %v; want %d", in, s, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "-1", "ten", "1XB", "1e30GiB"} {
		var s ByteSize
		if err := s.Set(in); err == nil {
			t.Errorf("Set(%q) = %d, want an error", in, s)
		}
	}
	s := ByteSize(256 << 20)
	if got := s.String(); got != "256MiB" {
		t.Errorf("String = %q, want 256MiB", got)
	}
}
