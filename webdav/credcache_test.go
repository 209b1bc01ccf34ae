package webdav

import (
	"slices"
	"testing"
	"time"

	"berth/berthtest"
)

// TestCredCache: a remembered Basic login is kept while in use, up to
// maxAge after its full check, and forgotten once unused for ttl; a
// directory account's is forgotten ttl after its check, used or not (the
// directory is asked only then).
func TestCredCache(t *testing.T) {
	const ttl, maxAge = 90 * time.Second, 15 * time.Minute
	for _, c := range []struct {
		name      string
		directory bool
		uses      []time.Duration // since the check, each a get
		want      []bool          // what each get finds
	}{
		{"used every minute, kept up to the bound", false, append(steps(time.Minute, 14), maxAge+time.Second), append(slices.Repeat([]bool{true}, 14), false)},
		{"used every 80 s, kept up to the bound", false, steps(80*time.Second, 12), append(slices.Repeat([]bool{true}, 11), false)},
		{"unused for longer than ttl", false, []time.Duration{time.Minute, time.Minute + ttl + time.Second}, []bool{true, false}},
		{"directory, used every minute", true, []time.Duration{time.Minute, 2 * time.Minute}, []bool{true, false}},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			clk := berthtest.NewClock(start)
			cc := newCredCache(ttl, maxAge, 10)
			cc.now = clk.Now
			k := [32]byte{1}
			cc.put(k, credEntry{person: 1, hash: "h", directory: c.directory})
			for i, at := range c.uses {
				clk.Set(start.Add(at))
				if _, ok := cc.get(k); ok != c.want[i] {
					t.Fatalf("get %d, %v after the check: %v, want %v", i, at, ok, c.want[i])
				}
			}
		})
	}
}

// steps is n times d, 2d, ... nd.
func steps(d time.Duration, n int) []time.Duration {
	var s []time.Duration
	for i := 1; i <= n; i++ {
		s = append(s, time.Duration(i)*d)
	}
	return s
}
