package kvtest

import (
	"context"
	"errors"
	"sync"

	"berth/kv"
)

// ErrStep is the error of the write transaction a StepFailer fails.
var ErrStep = errors.New("kvtest: the step failed")

// StepFailer is a real store with one of its write transactions failed:
// once armed, the Update after the next `left` fails with ErrStep without
// running, as a crash, a kill or a failed write between two steps of one
// change would leave the store. Tests of changes made in several steps
// use it to show each step leaves the store sound.
type StepFailer struct {
	kv.Store
	mu   sync.Mutex
	left int // Updates let through before the one that fails; -1: none fails
}

// NewStepFailer wraps s, armed with left (-1: disarmed).
func NewStepFailer(s kv.Store, left int) *StepFailer { return &StepFailer{Store: s, left: left} }

// MetaGeneration passes the store's on, which embedding would hide.
func (f *StepFailer) MetaGeneration() uint64 { return kv.MetaGeneration(f.Store) }

// Arm lets left more Updates through, then fails the next one (-1: none).
func (f *StepFailer) Arm(left int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.left = left
}

// Update fails with ErrStep when armed to, else runs fn on the store.
func (f *StepFailer) Update(ctx context.Context, fn func(kv.Txn) error) error {
	f.mu.Lock()
	fail := f.left == 0
	if f.left >= 0 {
		f.left--
	}
	f.mu.Unlock()
	if fail {
		return ErrStep
	}
	return f.Store.Update(ctx, fn)
}
