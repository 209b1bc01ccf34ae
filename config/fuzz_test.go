package config

import (
	"slices"
	"strings"
	"testing"
)

// FuzzByteSize reads arbitrary text as a ByteSize, as a file, the
// environment or a flag gives it, and checks that what it accepts is not
// negative and that its String reads back as the same size.
func FuzzByteSize(f *testing.F) {
	for _, s := range []string{"0", "1", "1023", "1025", "1500", "1GiB", "500MB", "1.5 KiB", "1,024", "1,5GB",
		"9223372036854775807", "9223372036854775808", "18446744073709551615", "99999999999999999999",
		"16 EiB", "8EiB", "7.99 EiB", "", ".", "-1", "1e3", "1 kb", " 1 ", "١٢", "0.1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var b ByteSize
		if err := b.UnmarshalText([]byte(s)); err != nil {
			return
		}
		if b < 0 {
			t.Fatalf("%q is %d bytes", s, b)
		}
		var back ByteSize
		if err := back.UnmarshalText([]byte(b.String())); err != nil || back != b {
			t.Fatalf("%q is %d bytes, written %q, read back as %d (%v)", s, b, b.String(), back, err)
		}
	})
}

// FuzzPrefixes reads arbitrary trusted_proxies lists and checks that
// every network it accepts is masked, and that the networks written back
// as a list read as the same.
func FuzzPrefixes(f *testing.F) {
	for _, s := range []string{"", "127.0.0.1", "10.0.0.0/8, ::1", "192.168.1.7/24", "::ffff:10.0.0.1", "::ffff:10.0.0.0/104",
		"fe80::1%eth0", "fe80::/10,,", "1.2.3.4/33", "x", " , ", "0.0.0.0/0,::/0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ps, err := Prefixes(s)
		if err != nil {
			return
		}
		var list []string
		for _, p := range ps {
			if !p.IsValid() || p != p.Masked() {
				t.Fatalf("%q: %v is not a masked network", s, p)
			}
			list = append(list, p.String())
		}
		back, err := Prefixes(strings.Join(list, ","))
		if err != nil || !slices.Equal(back, ps) {
			t.Fatalf("%q is %v, written %q, read back as %v (%v)", s, ps, list, back, err)
		}
	})
}
