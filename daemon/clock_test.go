package daemon

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"berth/berthtest"
)

// fixedClock is a database whose clock reads off from the node's by
// -ahead.
type fixedClock struct {
	node  func() time.Time
	ahead time.Duration
}

func (f fixedClock) Now(context.Context) (time.Time, error) { return f.node().Add(-f.ahead), nil }

// TestCheckClock: a node whose clock is more than clockSkewWarn from the
// database's, either way, says so; one in step says nothing.
func TestCheckClock(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		ahead time.Duration
		warn  bool
	}{
		{"in step", 0, false},
		{"a second ahead", time.Second, false},
		{"a second behind", -time.Second, false},
		{"a minute ahead", time.Minute, true},
		{"a minute behind", -time.Minute, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf berthtest.LogBuffer
			log := slog.New(slog.NewJSONHandler(&buf, nil))
			now := func() time.Time { return start }
			skew, err := clockSkew(t.Context(), fixedClock{now, tc.ahead}, now)
			if err != nil || skew != tc.ahead {
				t.Fatalf("clockSkew = %v, %v; want %v", skew, err, tc.ahead)
			}
			checkClock(t.Context(), fixedClock{now, tc.ahead}, now, nil, log)
			if got := strings.Contains(buf.String(), "clock differs from the database's"); got != tc.warn {
				t.Errorf("warned %v, want %v: %s", got, tc.warn, buf.String())
			}
		})
	}
}
