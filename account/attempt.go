package account

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"berth/kv"
)

// A sign-in attempt is counted on up to two counters (subjects), each a
// failRecord and a lockRecord in kv with a TTL:
//
//   - the account's ("p"<person>, or "l"<hash> for an unknown login), with
//     Lockout.MaxFailures, Window and Duration: many addresses cannot
//     guess one password;
//   - the client address's (addrSubject), with Lockout.AddressMaxFailures,
//     AddressWindow and AddressDuration: one address cannot try many
//     accounts, nor lock them all out, since once it is throttled its
//     attempts are refused before they reach an account's counter.
//
// Where the person has signed in from the address's network before
// (within Lockout.KnownAddressTTL), the attempt is counted on that pair's
// counter alone ("k"<person><address>), with the account's limits: the
// account's lock and the address's throttle, which strangers' guesses
// bring, do not keep the person out there, and guesses made there lock
// the pair.
//
// Each attempt is reserved in memory before its password is checked
// (reserve) and settled afterwards in one kv transaction (settle), so a
// failed attempt costs one write. Reserving and settling a subject's
// attempts are serialized by the subject's gate, and a reservation counts
// the failures already written plus the attempts reserved and not yet
// settled: attempts made at the same time cannot all pass the check, and
// with MaxFailures of them still being checked a further one is refused,
// as when each attempt was written before its check. Within one process,
// that is; several berth nodes on one store each let up to the threshold
// through at once, and the written count still locks after MaxFailures
// failures.

// failRecord counts the failed login attempts of one subject within the
// lockout window. For a known pair it also says until when the pair is
// known (a sign-in from there renews it).
type failRecord struct {
	Count      int       `cbor:"1,keyasint"`
	First      time.Time `cbor:"2,keyasint"`           // first failure of the series; the window starts here
	KnownUntil time.Time `cbor:"3,keyasint,omitempty"` // a known pair's: until when it counts as known
}

// lockRecord marks a locked subject.
type lockRecord struct {
	Until time.Time `cbor:"1,keyasint"`
}

// counterKind says which of an attempt's counters a subject is.
type counterKind int

const (
	accountCounter counterKind = iota // the account's (or unknown login's)
	addressCounter                    // the client address's
	knownCounter                      // a person and an address they signed in from
)

// counter is one subject an attempt is counted on, with its limits.
type counter struct {
	kind    counterKind
	subject []byte
	max     int
	window  time.Duration
	lockFor time.Duration
	gate    *gate
}

// gate serializes the reserving and settling of one subject's attempts in
// this process, and counts those reserved and not yet settled.
type gate struct {
	mu sync.Mutex
	// pending is the attempts reserved and not settled: mu guards its
	// changes, with the check before each reservation; passwordLock
	// reads it without (pendingOn).
	pending atomic.Int64
	refs    int // attempts holding the gate; Service.gatesMu guards it
}

// attempt is a reserved sign-in attempt: settle or release it exactly once.
type attempt struct {
	counters []counter // address first, then account; or the known pair alone
	addr     netip.Addr
}

// counters returns what an attempt of subject (the account's) from addr is
// counted on; known says the person signed in from addr's network before.
func (s *Service) counters(subject []byte, personID uint64, addr netip.Addr, known bool) []counter {
	lo := s.opts.Lockout
	if known {
		return []counter{{kind: knownCounter, subject: knownSubject(personID, addr), max: lo.MaxFailures, window: lo.Window, lockFor: lo.Duration}}
	}
	var cs []counter
	if as := addrSubject(addr); as != nil {
		cs = append(cs, counter{kind: addressCounter, subject: as, max: lo.AddressMaxFailures, window: lo.AddressWindow, lockFor: lo.AddressDuration})
	}
	return append(cs, counter{kind: accountCounter, subject: subject, max: lo.MaxFailures, window: lo.Window, lockFor: lo.Duration})
}

// holdGates takes a reference on the gate of each counter.
func (s *Service) holdGates(cs []counter) {
	s.gatesMu.Lock()
	defer s.gatesMu.Unlock()
	for i := range cs {
		k := string(cs[i].subject)
		g := s.gates[k]
		if g == nil {
			g = &gate{}
			s.gates[k] = g
		}
		g.refs++
		cs[i].gate = g
	}
}

// dropGates gives back the references holdGates took; a gate nobody holds
// is forgotten, so the map holds only subjects with attempts under way.
func (s *Service) dropGates(cs []counter) {
	s.gatesMu.Lock()
	defer s.gatesMu.Unlock()
	for _, c := range cs {
		if c.gate.refs--; c.gate.refs == 0 {
			delete(s.gates, string(c.subject))
		}
	}
}

// lockGates locks the counters' gates in their order (address before
// account: every attempt takes them so, so two cannot wait for each other).
func lockGates(cs []counter) func() {
	for _, c := range cs {
		c.gate.mu.Lock()
	}
	return func() {
		for i := len(cs) - 1; i >= 0; i-- {
			cs[i].gate.mu.Unlock()
		}
	}
}

// reserve counts an attempt from addr as under way on cs, or refuses it
// unchecked: lockRefusal's answer, with the attempts reserved on cs's
// gates counted. A refused attempt is counted nowhere and writes nothing.
func (s *Service) reserve(ctx context.Context, cs []counter, addr netip.Addr) (*attempt, error) {
	s.holdGates(cs)
	unlock := lockGates(cs)
	now := s.now()
	var refusal error
	err := s.db.View(ctx, func(tx kv.Txn) error {
		var err error
		refusal, err = s.lockRefusal(tx, cs, now, func(c counter) int { return int(c.gate.pending.Load()) })
		return err
	})
	if err == nil {
		err = refusal
	}
	if err != nil {
		unlock()
		s.dropGates(cs)
		return nil, err
	}
	s.underWay.Add(1) // before the gates: pendingOn reads it first
	for _, c := range cs {
		c.gate.pending.Add(1)
	}
	unlock()
	return &attempt{counters: cs, addr: addr}, nil
}

// lockRefusal is why an attempt counted on cs is refused unchecked at now
// (nil: it is not), from the first counter in cs's order that is locked,
// or whose failures written within its window, with the attempts reserved
// and not settled on it (pending), reach its threshold: a *ThrottledError
// for the address's counter, a *LockedError for the account's or the
// known pair's. err is the store's. Authenticate (reserve) and a
// remembered password (passwordLock) both ask it, so that the one is
// refused wherever the other is: the attempts under way count for both,
// else a guesser with a threshold's worth of wrong guesses still being
// checked would try any number more, each wrong one refused unchecked
// and counted nowhere, the right one, where a front end remembers it,
// let in.
func (s *Service) lockRefusal(tx kv.Txn, cs []counter, now time.Time, pending func(counter) int) (refusal, err error) {
	for _, c := range cs {
		var lr lockRecord
		switch err := s.get(tx, keyBytes(pfxLock, c.subject), &lr, ErrNotFound); {
		case err == nil && now.Before(lr.Until):
			return c.refusal(lr.Until, now), nil
		case err != nil && !errors.Is(err, ErrNotFound):
			return nil, err
		}
		n, err := s.failures(tx, c, now)
		if err != nil {
			return nil, err
		}
		if n += pending(c); n >= c.max {
			// Attempts still being checked will lock the subject
			// for its duration once one of them fails: that is
			// the wait to tell.
			return c.refusal(now.Add(c.lockFor), now), nil
		}
	}
	return nil, nil
}

// failures returns c's failures written within its window at now.
func (s *Service) failures(tx kv.Txn, c counter, now time.Time) (int, error) {
	var fr failRecord
	switch err := s.get(tx, keyBytes(pfxFail, c.subject), &fr, ErrNotFound); {
	case errors.Is(err, ErrNotFound):
		return 0, nil
	case err != nil:
		return 0, err
	case now.Sub(fr.First) >= c.window:
		return 0, nil
	}
	return fr.Count, nil
}

// refusal is the error of an attempt refused because c is locked until until.
func (c counter) refusal(until, now time.Time) error {
	if c.kind == addressCounter {
		return throttledError(until, now)
	}
	return lockedError(until, now)
}

// settle runs write (nil: nothing to write) under a's gates, then ends
// a's reservation: the count written and the reservation given up are
// seen together by the next reserve, so it neither misses the attempt
// nor counts it twice.
func (s *Service) settle(a *attempt, write func() error) error {
	unlock := lockGates(a.counters)
	defer func() {
		for _, c := range a.counters {
			c.gate.pending.Add(-1)
		}
		s.underWay.Add(-1)
		unlock()
		s.dropGates(a.counters)
	}()
	if write == nil {
		return nil
	}
	return write()
}

// release gives up a reserved attempt that judged no password (the hash
// queue was full): it counts as nothing and writes nothing.
func (s *Service) release(a *attempt) { s.settle(a, nil) }

// settled is what settling a failed attempt found.
type settled struct {
	accountLock *LockedError    // the account (or known pair) is locked
	addrLock    *ThrottledError // the address is throttled
	locking     bool            // this failure locked the account or pair
	throttling  bool            // this failure throttled the address
	count       int             // the account's (or pair's) failures, this one included
}

// err is the error to report for a failed attempt: the lock it met or
// made, the account's first (it is the spec's answer), else wrong
// credentials.
func (st settled) err() error {
	switch {
	case st.accountLock != nil:
		return st.accountLock
	case st.addrLock != nil:
		return st.addrLock
	}
	return ErrInvalidCredentials
}

// settleFailure writes a failed attempt, in one transaction: each counter
// counts it, one that reaches its threshold is locked (and its count
// cleared), and for a known login p the failure, and the lock it brings,
// go to the activity log, for reason. The lockout bounds those records: at
// most MaxFailures failures and one lock per subject for each lock's
// Duration, since a refused attempt writes nothing (reserve) and one that
// finds the subject locked by an attempt elsewhere records nothing.
// Unknown logins are not recorded: they name no person or organization
// whose activity lists would show them, and an anonymous client could
// otherwise fill the log for a year.
func (s *Service) settleFailure(ctx context.Context, a *attempt, known bool, p Person, reason string) (settled, error) {
	var st settled
	err := s.settle(a, func() error {
		return s.db.Update(ctx, func(tx kv.Txn) error {
			st = settled{}
			now := s.now()
			for _, c := range a.counters {
				// Another node may have locked the subject meanwhile.
				var lr lockRecord
				switch err := s.get(tx, keyBytes(pfxLock, c.subject), &lr, ErrNotFound); {
				case err == nil && now.Before(lr.Until):
					st.lock(c, lockedError(lr.Until, now).(*LockedError), throttledError(lr.Until, now).(*ThrottledError))
					continue
				case err != nil && !errors.Is(err, ErrNotFound):
					return err
				}
				var fr failRecord
				if err := s.get(tx, keyBytes(pfxFail, c.subject), &fr, ErrNotFound); err != nil && !errors.Is(err, ErrNotFound) {
					return err
				}
				if fr.Count == 0 || now.Sub(fr.First) >= c.window {
					fr.Count, fr.First = 0, now
				}
				fr.Count++
				if c.kind != addressCounter {
					st.count = fr.Count
				}
				if fr.Count < c.max {
					if err := s.putFail(tx, c, fr, now); err != nil {
						return err
					}
					continue
				}
				until := now.Add(c.lockFor)
				st.lock(c, lockedError(until, now).(*LockedError), throttledError(until, now).(*ThrottledError))
				if c.kind == addressCounter {
					st.throttling = true
				} else {
					st.locking = true
				}
				fr.Count, fr.First = 0, time.Time{}
				if err := s.putFail(tx, c, fr, now); err != nil {
					return err
				}
				if err := s.putTTL(tx, keyBytes(pfxLock, c.subject), lockRecord{Until: until}, c.lockFor); err != nil {
					return err
				}
			}
			if !known {
				return nil
			}
			if st.accountLock != nil && !st.locking {
				return nil // locked by an attempt elsewhere: already recorded
			}
			if err := s.record(ctx, tx, loginFailedChange(p, reason)); err != nil {
				return err
			}
			if st.locking {
				c := personChange(ActAccountLocked, p)
				c.Actor, c.Data = System, fmt.Sprintf("locked until %s after %d failed logins", st.accountLock.Until.Format(time.RFC3339), st.count)
				if a.counters[0].kind == knownCounter {
					c.Data += " from " + a.addr.String()
				}
				return s.record(ctx, tx, c)
			}
			return nil
		})
	})
	return st, err
}

// lock notes that c is locked, with le or te as its error by c's kind.
func (st *settled) lock(c counter, le *LockedError, te *ThrottledError) {
	if c.kind == addressCounter {
		st.addrLock = te
	} else {
		st.accountLock = le
	}
}

// putFail writes c's failure record: an empty one is deleted, but a known
// pair's keeps saying it is known.
func (s *Service) putFail(tx kv.Txn, c counter, fr failRecord, now time.Time) error {
	k := keyBytes(pfxFail, c.subject)
	if c.kind == knownCounter && now.Before(fr.KnownUntil) {
		return s.putTTL(tx, k, &fr, fr.KnownUntil.Sub(now))
	}
	if fr.Count == 0 {
		return tx.Delete(k)
	}
	return s.putTTL(tx, k, &fr, c.window-now.Sub(fr.First))
}

// settleSuccess writes an attempt whose password was right, inside tx:
// the account's (or known pair's) failures are cleared, and the pair of
// the person and the address becomes known, or stays known longer. The
// address's failures stay: a client with one account of its own could
// otherwise clear its address's count between guesses at others.
func (s *Service) settleSuccess(tx kv.Txn, a *attempt, personID uint64) error {
	now := s.now()
	for _, c := range a.counters {
		if c.kind == accountCounter {
			if err := tx.Delete(keyBytes(pfxFail, c.subject)); err != nil {
				return err
			}
		}
	}
	ks := knownSubject(personID, a.addr)
	if ks == nil {
		return nil
	}
	if ttl := s.opts.Lockout.KnownAddressTTL; ttl > 0 {
		return s.putTTL(tx, keyBytes(pfxFail, ks), &failRecord{KnownUntil: now.Add(ttl)}, ttl)
	}
	return tx.Delete(keyBytes(pfxFail, ks))
}

// knownAddress reports whether the person signed in from addr's network
// within KnownAddressTTL.
func (s *Service) knownAddress(tx kv.Txn, personID uint64, addr netip.Addr) (bool, error) {
	ks := knownSubject(personID, addr)
	if ks == nil || s.opts.Lockout.KnownAddressTTL <= 0 {
		return false, nil
	}
	var fr failRecord
	switch err := s.get(tx, keyBytes(pfxFail, ks), &fr, ErrNotFound); {
	case errors.Is(err, ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return s.now().Before(fr.KnownUntil), nil
}

// refusalDelay holds a refusal of a network client (one with an address)
// for Lockout.RefusalDelay, or until ctx ends: a refused attempt costs a
// few microseconds, and a client that sends the next one as soon as it
// has the answer would otherwise get thousands a second through each
// connection, and with them the CPU the files are served with. Waiting
// costs the server a parked goroutine.
func (s *Service) refusalDelay(ctx context.Context, addr netip.Addr) {
	d := s.opts.Lockout.RefusalDelay
	if d <= 0 || !addr.IsValid() {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// accountLock returns the lock of personID's account as a request from
// ctx's client address meets it (a *LockedError, or nil): at an address
// the person is known at, a lock strangers' guesses brought does not
// apply, that pair's own lock does. exempt says the answer depended on
// the address, so a cache of it must not serve it to another address.
func (s *Service) accountLock(ctx context.Context, tx kv.Txn, personID uint64) (exempt bool, err error) {
	lockErr := s.locked(tx, s.loginSubject("", personID))
	if lockErr == nil {
		return false, nil
	}
	addr := ClientAddr(ctx)
	known, err := s.knownAddress(tx, personID, addr)
	switch {
	case err != nil:
		return false, err
	case !known:
		return false, lockErr
	}
	if err := s.locked(tx, knownSubject(personID, addr)); err != nil {
		return false, err
	}
	return true, nil
}

// passwordLock is accountLock for a password a front end remembers
// (LoginCallerRef), which is refused, though not checked again, wherever
// Authenticate would refuse it unchecked from ctx's address
// (lockRefusal over the same counters). Otherwise the remembered password
// is let in where the same password checked is refused unchecked and
// uncounted: to a client at a throttled address, or one guessing where
// the person is known, a guess let in is the right one, and its guesses
// never lock anything. exempt says the answer holds only while the
// address stays known, which ends without a commit: the account's lock
// or the address's throttle refuses the person elsewhere.
func (s *Service) passwordLock(ctx context.Context, tx kv.Txn, personID uint64) (exempt bool, err error) {
	addr, now := ClientAddr(ctx), s.now()
	known, err := s.knownAddress(tx, personID, addr)
	if err != nil {
		return false, err
	}
	subject := s.loginSubject("", personID)
	switch refusal, err := s.lockRefusal(tx, s.counters(subject, personID, addr, known), now, s.pendingOn); {
	case err != nil:
		return false, err
	case refusal != nil:
		return false, refusal
	case !known:
		return false, nil
	}
	refusal, err := s.lockRefusal(tx, s.counters(subject, personID, addr, false), now, s.pendingOn)
	return refusal != nil, err
}

// pendingOn is the attempts reserved on c's subject and not settled, as
// seen now: c holds no gate (passwordLock). It takes gatesMu only, which
// guards no store access, so a transaction may ask it.
func (s *Service) pendingOn(c counter) int {
	if s.underWay.Load() == 0 {
		return 0
	}
	s.gatesMu.Lock()
	g := s.gates[string(c.subject)]
	s.gatesMu.Unlock()
	if g == nil {
		return 0
	}
	return int(g.pending.Load())
}

// underWayFor reports whether attempts are reserved and not settled on a
// subject that passwordLock asks for personID from addr: a remembered
// password's answer kept from before them (LoginCallerRef) no longer
// holds, since they begin and end without a commit.
func (s *Service) underWayFor(personID uint64, addr netip.Addr) bool {
	if s.underWay.Load() == 0 {
		return false
	}
	for _, subject := range [][]byte{s.loginSubject("", personID), addrSubject(addr), knownSubject(personID, addr)} {
		if subject != nil && s.pendingOn(counter{subject: subject}) > 0 {
			return true
		}
	}
	return false
}

// forgetAddresses deletes what personID's known addresses hold, their
// counters and locks: an administrator's unlock or a password reset ends
// every lock of the person, and a reset person starts again from no known
// address.
func (s *Service) forgetAddresses(tx kv.Txn, personID uint64) error {
	var keys [][]byte
	for _, pfx := range []string{pfxFail, pfxLock} {
		prefix := keyBytes(pfx, key("k", personID))
		if err := tx.Scan(prefix, nil, func(k, _ []byte) error {
			keys = append(keys, append([]byte(nil), k...))
			return nil
		}); err != nil {
			return err
		}
	}
	for _, k := range keys {
		if err := tx.Delete(k); err != nil {
			return err
		}
	}
	return nil
}
