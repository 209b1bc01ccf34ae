package account

import (
	"context"
	"testing"
)

// BenchmarkAuthenticate measures one login with the production argon2
// parameters (m=64 MiB, t=1, p=2): the cost an attacker and a WebDAV
// client without a token pay per request.
func BenchmarkAuthenticate(b *testing.B) {
	ctx := context.Background()
	s := newService(b, DefaultOptions())
	fixture(b, s)
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.Authenticate(ctx, "alice", pw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidateAccess measures the per-request bearer token check.
func BenchmarkValidateAccess(b *testing.B) {
	ctx := context.Background()
	s := newService(b, testOptions())
	_, alice := fixture(b, s)
	toks, err := s.IssueTokens(ctx, alice.ID, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.ValidateAccess(ctx, toks.AccessToken); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkIssueTokens measures a token grant after the password check
// (one fsynced kv commit).
func BenchmarkIssueTokens(b *testing.B) {
	ctx := context.Background()
	s := newService(b, testOptions())
	_, alice := fixture(b, s)
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.IssueTokens(ctx, alice.ID, 0); err != nil {
			b.Fatal(err)
		}
	}
}
