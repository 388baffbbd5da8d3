package core

import "testing"

// BenchmarkCodeOf asks the code of a completion's result, as the AMQP
// front asks it of every one (settleRetryable): nil, and a core error.
func BenchmarkCodeOf(b *testing.B) {
	errs := []error{nil, lockLost()}
	b.ReportAllocs()
	for b.Loop() {
		for _, err := range errs {
			_ = CodeOf(err)
		}
	}
}
