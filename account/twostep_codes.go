package account

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/binary"
	"fmt"
	"math/big"
	"regexp"
	"strings"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/hotp"
)

// TOTP parameters: RFC 6238's defaults, which every authenticator app
// reads from the otpauth:// URI (and most assume).
const (
	totpPeriod = 30 // seconds a code lasts
	totpSkew   = 1  // steps either side of now accepted, for clocks that drift
	// totpStale is how many steps back a code is told "expired" rather
	// than "wrong" (log and metrics only: both are refused).
	totpStale = 10
)

// numRecoveryCodes are made at confirmation and on request.
const numRecoveryCodes = 10

// maxConfirmTries wrong codes end an enrollment: its code is then no
// longer guessable within CodeTTL.
const maxConfirmTries = 5

var recoveryEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// totpStep returns the time step of secret's code that equals code: the
// step of a code accepted now (within totpSkew of now), or, with stale, an
// older one, up to totpStale steps back. found is false when code is no
// code of secret near now.
func totpStep(secret, code string, now time.Time) (step int64, stale, found bool) {
	if len(code) != 6 {
		return 0, false, false
	}
	cur := now.Unix() / totpPeriod
	for k := int64(totpSkew); k >= -totpStale; k-- {
		want, err := hotp.GenerateCodeCustom(secret, uint64(cur+k), hotp.ValidateOpts{Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
		if err != nil {
			return 0, false, false
		}
		if subtle.ConstantTimeCompare([]byte(want), []byte(code)) == 1 {
			return cur + k, k < -totpSkew, true
		}
	}
	return 0, false, false
}

// newCode returns six random decimal digits, the code of the e-mail and
// SMS modes.
func newCode() (string, error) {
	n, err := rand.Int(rand.Reader, big.NewInt(1_000_000))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%06d", n.Int64()), nil
}

// codeHash is what is stored of a code: codes are not kept in the clear,
// and a code of one person is no code of another.
func codeHash(kind string, personID uint64, code string) []byte {
	h := sha256.New()
	h.Write([]byte(kind))
	h.Write(binary.BigEndian.AppendUint64(nil, personID))
	h.Write([]byte(code))
	return h.Sum(nil)
}

// newRecoveryCodes returns n recovery codes as shown to the person
// ("abcde-fghij": 50 random bits, base32) and their hashes.
func newRecoveryCodes(personID uint64, n int) ([]string, [][]byte, error) {
	codes := make([]string, n)
	hashes := make([][]byte, n)
	for i := range codes {
		b := make([]byte, 7)
		if _, err := rand.Read(b); err != nil {
			return nil, nil, err
		}
		c := strings.ToLower(recoveryEncoding.EncodeToString(b))[:10]
		codes[i] = c[:5] + "-" + c[5:]
		hashes[i] = codeHash("recovery", personID, c)
	}
	return codes, hashes, nil
}

// recoveryForm returns code as a recovery code is stored (lower case, no
// dash or spaces), and whether it has a recovery code's shape.
func recoveryForm(code string) (string, bool) {
	c := strings.ToLower(strings.NewReplacer("-", "", " ", "").Replace(code))
	if len(c) != 10 {
		return "", false
	}
	for _, r := range c {
		if !(r >= 'a' && r <= 'z' || r >= '2' && r <= '7') {
			return "", false
		}
	}
	return c, true
}

// phoneRE is an E.164 number once spaces, dashes, dots and brackets are
// taken out: "+", then 8 to 15 digits, the first not 0.
var phoneRE = regexp.MustCompile(`^\+[1-9][0-9]{7,14}$`)

// normalizePhone returns phone in E.164, or an error for the phone field.
func normalizePhone(phone string) (string, error) {
	p := strings.NewReplacer(" ", "", "-", "", ".", "", "(", "", ")", "").Replace(phone)
	if !phoneRE.MatchString(p) {
		return "", invalid("phone", `an international number is required, "+" and the country code first (E.164, e.g. +41 44 668 18 00)`)
	}
	return p, nil
}
