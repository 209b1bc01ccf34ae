package share

import (
	"strconv"
	"time"

	"berth/account"
)

// DefaultMailPerHour is Options.MailPerHour when it is 0.
const DefaultMailPerHour = 100

// newMailBudget bounds the e-mail berth sends on one sender's behalf to
// max an hour: the notices of one person's share links (to the address
// they set, which nothing verifies, with the shared item's name in the
// subject) and the invitations of one top-level organization's shares
// (to any address). Without it one person made berth mail any address,
// once per download of their link, and one administrator any number of
// addresses per update, and the mail queue all tenants share dropped
// everyone else's notices while it was full.
func newMailBudget(max int, now func() time.Time) *account.Budget {
	return account.NewBudget(max, time.Hour, now)
}

// personSender and orgSender name the senders the budget counts.
func personSender(id uint64) string { return "person:" + strconv.FormatUint(id, 10) }
func orgSender(id uint64) string    { return "org:" + strconv.FormatUint(id, 10) }
