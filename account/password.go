package account

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
)

// Argon2Params are argon2id parameters (RFC 9106). They are recorded in
// each hash (PHC string format), so changing them affects only new hashes.
type Argon2Params struct {
	// Memory in KiB. Default 19 MiB (19456), see DefaultArgon2Params. RFC
	// 9106's m=64 MiB measured 0.2 to 0.4 s per hash on this machine class
	// under load (BenchmarkAuthenticate).
	Memory uint32
	// Time is the number of passes. Default 2.
	Time uint32
	// Threads is the parallelism. Default 1.
	Threads uint8
	// SaltLength in bytes. Default 16.
	SaltLength uint32
	// KeyLength, the hash length in bytes. Default 32.
	KeyLength uint32
}

// DefaultArgon2Params returns OWASP's second argon2id configuration,
// m=19 MiB, t=2, p=1, with a 16-byte salt and a 32-byte hash. Its cost is
// equivalent to m=64 MiB, t=1 against an attacker, but each login holds 19
// MiB instead of 64: on a two-core file server logins come in bursts
// (every device of an office at 9 o'clock), and their memory is taken from
// the page cache that serves files. About 45 ms per hash here.
func DefaultArgon2Params() Argon2Params {
	return Argon2Params{Memory: 19 * 1024, Time: 2, Threads: 1, SaltLength: 16, KeyLength: 32}
}

// Bounds on parameters read back from stored hashes, so a corrupt or
// hostile record cannot make one login allocate gigabytes.
const (
	maxArgonMemory  = 1 << 20 // KiB, 1 GiB
	maxArgonTime    = 64
	maxArgonKeyLen  = 128
	maxPasswordSize = 1024 // bytes; longer inputs are refused before hashing
)

var errBadHash = errors.New("account: malformed password hash")

// hashPassword returns the PHC string
// $argon2id$v=19$m=<KiB>,t=<passes>,p=<threads>$<salt>$<hash> with salt and
// hash in unpadded standard base64, as the PHC format specifies.
func (s *Service) hashPassword(ctx context.Context, password string) (string, error) {
	p := s.opts.Argon2
	salt := make([]byte, p.SaltLength)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	sum, err := s.argon(ctx, password, salt, p, false)
	if err != nil {
		return "", err
	}
	return encodePHC(p, salt, sum), nil
}

func encodePHC(p Argon2Params, salt, sum []byte) string {
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, p.Memory, p.Time, p.Threads, b64.EncodeToString(salt), b64.EncodeToString(sum))
}

// argon computes the argon2id key, waiting for a free hash slot first.
// A sign-in's check (queued) waits only while fewer than
// Options.MaxHashQueue others do, and is refused with ErrBusy beyond: a
// flood of logins then costs a refusal each, not a queue that grows
// without bound and delays every sign-in behind it. Setting a password
// (an administrator's or the person's own, already signed in) is not
// refused: it waits.
func (s *Service) argon(ctx context.Context, password string, salt []byte, p Argon2Params, queued bool) ([]byte, error) {
	select {
	case s.hashSlots <- struct{}{}:
	default:
		if queued {
			if s.hashWaiting.Add(1) > int64(s.opts.MaxHashQueue) {
				s.hashWaiting.Add(-1)
				return nil, ErrBusy
			}
			s.metrics.hashWaiting.Inc()
			defer func() {
				s.hashWaiting.Add(-1)
				s.metrics.hashWaiting.Dec()
			}()
		}
		select {
		case s.hashSlots <- struct{}{}:
			// Both may be ready when this wait is scheduled late, and
			// select picks either: a check whose callers all left
			// (Authenticate cancels it before it returns) must not
			// hash for nobody.
			if err := ctx.Err(); err != nil {
				<-s.hashSlots
				return nil, err
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	defer func() { <-s.hashSlots }()
	return argon2.IDKey([]byte(password), salt, p.Time, p.Memory, p.Threads, p.KeyLength), nil
}

// verifyPassword reports whether password matches the PHC string encoded.
func (s *Service) verifyPassword(ctx context.Context, encoded, password string) (bool, error) {
	p, salt, want, err := decodePHC(encoded)
	if err != nil {
		return false, err
	}
	got, err := s.argon(ctx, password, salt, p, true)
	if err != nil {
		return false, err
	}
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// dummyVerify spends the same argon2 work as verifying against a hash made
// with the current parameters, for logins that match no person, so that
// response time does not tell which logins exist.
func (s *Service) dummyVerify(ctx context.Context, password string) error {
	p := s.opts.Argon2
	salt := make([]byte, p.SaltLength)
	_, err := s.argon(ctx, password, salt, p, true)
	return err
}

func decodePHC(encoded string) (p Argon2Params, salt, sum []byte, err error) {
	parts := strings.Split(encoded, "$")
	// "", "argon2id", "v=19", "m=..,t=..,p=..", salt, hash
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return p, nil, nil, errBadHash
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return p, nil, nil, errBadHash
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.Memory, &p.Time, &p.Threads); err != nil {
		return p, nil, nil, errBadHash
	}
	b64 := base64.RawStdEncoding
	if salt, err = b64.DecodeString(parts[4]); err != nil {
		return p, nil, nil, errBadHash
	}
	if sum, err = b64.DecodeString(parts[5]); err != nil {
		return p, nil, nil, errBadHash
	}
	if p.Memory == 0 || p.Memory > maxArgonMemory || p.Time == 0 || p.Time > maxArgonTime ||
		p.Threads == 0 || len(sum) == 0 || len(sum) > maxArgonKeyLen {
		return p, nil, nil, errBadHash
	}
	p.SaltLength, p.KeyLength = uint32(len(salt)), uint32(len(sum))
	return p, salt, sum, nil
}

// checkPassword validates a new password's length.
func (s *Service) checkPassword(password string) error {
	if utf8.RuneCountInString(password) < s.opts.MinPasswordLength {
		return invalid("password", fmt.Sprintf("shorter than %d characters", s.opts.MinPasswordLength))
	}
	if len(password) > maxPasswordSize {
		return invalid("password", fmt.Sprintf("longer than %d bytes", maxPasswordSize))
	}
	return nil
}
