package berthtest

import (
	"sync/atomic"
	"time"
)

// Clock is a clock that moves only when a test moves it, for the Now
// options of vfs, account and the front ends (pass its Now). It is safe
// for concurrent use: requests read it while the test moves it.
type Clock struct{ ns atomic.Int64 }

// NewClock returns a Clock that reads start.
func NewClock(start time.Time) *Clock {
	c := &Clock{}
	c.ns.Store(start.UnixNano())
	return c
}

// Now is the clock's time.
func (c *Clock) Now() time.Time { return time.Unix(0, c.ns.Load()) }

// Add moves the clock by d.
func (c *Clock) Add(d time.Duration) { c.ns.Add(int64(d)) }

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) { c.ns.Store(t.UnixNano()) }
