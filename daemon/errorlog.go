package daemon

import (
	"context"
	"log"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// Bounds on the lines a listener's net/http error log writes: at most
// errorLogBurst in each errorLogWindow, then one line with how many were
// left out. net/http writes a line for every connection whose TLS
// handshake fails (a port scanner's, garbage, plain HTTP to the HTTPS
// port), at warn: without a bound one client wrote 7,000 lines a second,
// at every log level, by opening connections and sending a few bytes.
const (
	errorLogBurst  = 20
	errorLogWindow = time.Minute
)

// serverErrorLog is the ErrorLog of the http.Server of listener name:
// warn lines of component http, at most errorLogBurst a errorLogWindow.
func serverErrorLog(logger *slog.Logger, name string) *log.Logger {
	h := logger.With("component", "http", "listener", name).Handler()
	return slog.NewLogLogger(newLimitedHandler(h, errorLogBurst, errorLogWindow), slog.LevelWarn)
}

// limitedHandler passes at most burst records each window to its
// handler and counts the others; when a window that left some out ends,
// it writes one line, "log lines left out", with their number
// (left_out), so the operator still sees that the flood went on and how
// large it was.
type limitedHandler struct {
	h slog.Handler
	l *lineLimit
}

// lineLimit is the state the handlers derived from one limitedHandler
// (WithAttrs, WithGroup) share: the bound is on the listener's lines,
// however they were built.
type lineLimit struct {
	burst  int
	window time.Duration
	base   slog.Handler // writes the summary line
	// now is the clock windows are measured by: time.Now, or the
	// tests', so that a window's bound does not hang on how fast a
	// loaded machine runs them.
	now func() time.Time

	mu      sync.Mutex
	start   time.Time // of the current window
	passed  int       // records passed in it
	dropped int       // records left out and not yet reported
	pending bool      // a timer will report dropped
}

func newLimitedHandler(h slog.Handler, burst int, window time.Duration) *limitedHandler {
	return &limitedHandler{h: h, l: &lineLimit{burst: burst, window: window, base: h, now: time.Now}}
}

// Enabled is the wrapped handler's.
func (lh *limitedHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return lh.h.Enabled(ctx, level)
}

// panicLine starts the line net/http writes for a handler's panic, with
// its stack: WebDAV and the share-link pages recover none themselves.
const panicLine = "http: panic serving"

// Handle passes r on while the window has room, else counts it. A
// panic's line always passes: any client can fill the window with bad
// handshakes, and a bug's only trace must not be what it drops.
func (lh *limitedHandler) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, panicLine) || lh.l.admit() {
		return lh.h.Handle(ctx, r)
	}
	return nil
}

// WithAttrs shares the bound.
func (lh *limitedHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &limitedHandler{h: lh.h.WithAttrs(attrs), l: lh.l}
}

// WithGroup shares the bound.
func (lh *limitedHandler) WithGroup(name string) slog.Handler {
	return &limitedHandler{h: lh.h.WithGroup(name), l: lh.l}
}

// admit reports whether one more record fits in the current window; one
// that does not is counted, and the end of the window reports the count.
func (l *lineLimit) admit() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if l.start.IsZero() || now.Sub(l.start) >= l.window {
		l.start, l.passed = now, 0
	}
	if l.passed < l.burst {
		l.passed++
		return true
	}
	l.dropped++
	if !l.pending {
		l.pending = true
		time.AfterFunc(l.start.Add(l.window).Sub(now), l.report)
	}
	return false
}

// report writes the line that says how many records the window left out.
func (l *lineLimit) report() {
	l.mu.Lock()
	n := l.dropped
	l.dropped, l.pending = 0, false
	l.mu.Unlock()
	if n == 0 {
		return
	}
	r := slog.NewRecord(time.Now(), slog.LevelWarn, "log lines left out", 0)
	r.AddAttrs(slog.Int("left_out", n), slog.Duration("window", l.window))
	_ = l.base.Handle(context.Background(), r)
}
