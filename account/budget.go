package account

import (
	"sync"
	"time"
)

// Budget bounds what one sender (a person, an organization: any key the
// caller chooses) may do in a window of time: share link notices and
// share invitations by e-mail, activity notes. It counts in memory, on
// this node only, in fixed windows that start at a sender's first use:
// on n nodes a sender may use n times its bound. Safe for concurrent
// use.
type Budget struct {
	max    int // 0 or less: no bound
	window time.Duration
	now    func() time.Time
	mu     sync.Mutex
	// used maps a sender to its window; windows past their end are
	// dropped once the map grows.
	used map[string]budgetUse
}

type budgetUse struct {
	start time.Time
	n     int
	// refused counts the refusals of the window, so that a flood is
	// logged once, not once a refusal.
	refused int
}

// budgetSenders is how many senders a Budget keeps before it drops
// those whose windows have ended.
const budgetSenders = 4096

// NewBudget returns a budget of max uses per window for each sender (max
// 0 or less: no bound); now nil is time.Now.
func NewBudget(max int, window time.Duration, now func() time.Time) *Budget {
	if now == nil {
		now = time.Now
	}
	return &Budget{max: max, window: window, now: now, used: map[string]budgetUse{}}
}

// Max is the bound of each sender's window; 0 or less: none.
func (b *Budget) Max() int { return b.max }

// Use returns whether sender may use n more now, with what it had left
// of its window before, and if so counts them; first says that a refusal
// is the window's first.
func (b *Budget) Use(sender string, n int) (ok bool, left int, first bool) {
	if b.max <= 0 || n <= 0 {
		return true, b.max, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	u := b.used[sender]
	if now.Sub(u.start) >= b.window {
		u = budgetUse{start: now}
	}
	left = b.max - u.n
	if n > left {
		u.refused++
		b.used[sender] = u
		return false, left, u.refused == 1
	}
	u.n += n
	if len(b.used) >= budgetSenders {
		for k, v := range b.used {
			if now.Sub(v.start) >= b.window {
				delete(b.used, k)
			}
		}
	}
	b.used[sender] = u
	return true, left, false
}

// GiveBack returns n uses to sender's window: counted for a change that
// then failed.
func (b *Budget) GiveBack(sender string, n int) {
	if b.max <= 0 || n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if u, ok := b.used[sender]; ok {
		u.n = max(0, u.n-n)
		b.used[sender] = u
	}
}
