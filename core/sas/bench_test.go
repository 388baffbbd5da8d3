package sas

import (
	"testing"
	"time"
)

func BenchmarkValidate(b *testing.B) {
	v := newTestValidator(b, t0)
	tok := goToken("https://localhost:5300/t1/Subscriptions/s1?api-version=2024-05", testKeyName, testKey, "1900000000")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Validate(tok, "t1/Subscriptions/s1", Listen); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSign(b *testing.B) {
	exp := t0.Add(time.Hour)
	b.ReportAllocs()
	for b.Loop() {
		_ = Sign("sb://localhost/q1", testKeyName, testKey, exp)
	}
}
