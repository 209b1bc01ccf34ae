package vfs

import (
	"math"
	"testing"
)

// TestOver checks the quotas' comparison at the ends of int64: a length
// a client declares (a staged upload's) is any int64, and a sum that
// wrapped is over the quota, never room under it.
func TestOver(t *testing.T) {
	cases := []struct {
		name              string
		used, grow, quota int64
		over              bool
	}{
		{"fits", 50, 50, 100, false},
		{"fills", 60, 40, 100, false},
		{"one past", 50, 51, 100, true},
		{"used over already", 150, 1, 100, true},
		{"grow at the top of int64", 1, math.MaxInt64, 100, true},
		{"used and grow past int64", math.MaxInt64 - 10, 20, math.MaxInt64 - 5, true},
		{"used wrapped below 0", -1 << 30, 1, 100, true},
		{"used at the bottom of int64", math.MinInt64, 1, math.MaxInt64, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := over(c.used, c.grow, c.quota); got != c.over {
				t.Fatalf("over(%d, %d, %d) = %v, want %v", c.used, c.grow, c.quota, got, c.over)
			}
		})
	}
}
