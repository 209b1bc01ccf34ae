package account

import (
	"context"
	"testing"
)

func TestPasswordHash(t *testing.T) {
	ctx := context.Background()
	s := New(nil, testOptions())
	h, err := s.hashPassword(ctx, "pässwörd")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.verifyPassword(ctx, h, "pässwörd"); !ok || err != nil {
		t.Fatalf("verify right password = %v, %v", ok, err)
	}
	if ok, _ := s.verifyPassword(ctx, h, "passwörd"); ok {
		t.Fatal("verify wrong password = true")
	}
	h2, _ := s.hashPassword(ctx, "pässwörd")
	if h == h2 {
		t.Fatal("two hashes of one password are equal: salt not random")
	}
	for _, bad := range []string{"", "$argon2i$v=19$m=1024,t=1,p=1$c2FsdA$aGFzaA", "$argon2id$v=19$m=99999999,t=1,p=1$c2FsdA$aGFzaA", "$argon2id$v=19$m=1024,t=1,p=1$!!$aGFzaA"} {
		if _, err := s.verifyPassword(ctx, bad, "x"); err == nil {
			t.Errorf("decoded malformed hash %q", bad)
		}
	}
}
