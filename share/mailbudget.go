package share

import (
	"strconv"
	"sync"
	"time"
)

// DefaultMailPerHour is Options.MailPerHour when it is 0.
const DefaultMailPerHour = 100

// mailWindow is how long a sender's mail budget lasts before it is whole
// again.
const mailWindow = time.Hour

// mailBudget bounds the e-mail berth sends on one sender's behalf: the
// notices of one person's share links (to the address they set, which
// nothing verifies, with the shared item's name in the subject) and the
// invitations of one top-level organization's shares (to any address).
// Without it one person made berth mail any address, once per download
// of their link, and one administrator any number of addresses per
// update, and the mail queue all tenants share dropped everyone else's
// notices while it was full.
//
// It counts on this node only, in fixed windows of mailWindow from a
// sender's first mail: on n nodes a sender may send n times max.
type mailBudget struct {
	max int // 0 or less: no bound
	now func() time.Time
	mu  sync.Mutex
	// used maps a sender to the start of its window and what it sent in
	// it; windows past their hour are dropped once the map grows.
	used map[string]mailUse
}

type mailUse struct {
	start time.Time
	n     int
	// refused counts the mails refused in the window, so that a flood
	// is logged once, not once a mail.
	refused int
}

// newMailBudget returns a budget of max mails an hour per sender.
func newMailBudget(max int, now func() time.Time) *mailBudget {
	return &mailBudget{max: max, now: now, used: map[string]mailUse{}}
}

// personSender and orgSender name the senders a budget counts.
func personSender(id uint64) string { return "person:" + strconv.FormatUint(id, 10) }
func orgSender(id uint64) string    { return "org:" + strconv.FormatUint(id, 10) }

// use returns whether sender may send n more mails now, with what it
// could send in its window before, and if so counts them; first says
// that a refusal is the window's first.
func (b *mailBudget) use(sender string, n int) (ok bool, left int, first bool) {
	if b.max <= 0 || n <= 0 {
		return true, b.max, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	u := b.used[sender]
	if now.Sub(u.start) >= mailWindow {
		u = mailUse{start: now}
	}
	left = b.max - u.n
	if n > left {
		u.refused++
		b.used[sender] = u
		return false, left, u.refused == 1
	}
	u.n += n
	if len(b.used) >= 4096 {
		for k, v := range b.used {
			if now.Sub(v.start) >= mailWindow {
				delete(b.used, k)
			}
		}
	}
	b.used[sender] = u
	return true, left, false
}

// giveBack returns n mails to sender's budget: counted for a change that
// then failed.
func (b *mailBudget) giveBack(sender string, n int) {
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
