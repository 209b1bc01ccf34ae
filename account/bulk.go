package account

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"berth/kv"
)

// bulkBatch is how many persons CreatePersons stores per transaction (500):
// big enough that one fsynced commit is shared by many persons, small
// enough that a transaction stays far below what the engine commits
// atomically (each person writes about ten keys) and that a failure
// loses little. A variable only so that tests can cross batches cheaply.
var bulkBatch = 500

// BulkError is CreatePersons' error: which input failed and why. Err is
// what CreatePerson would have returned for that input (ErrInvalid with
// a *FieldError, ErrExists, ErrUserLimitExceeded, ...), so errors.Is and
// errors.As see through it.
type BulkError struct {
	Index int // the failing input's index in the slice given
	Err   error
}

func (e *BulkError) Error() string { return fmt.Sprintf("person %d of the batch: %v", e.Index, e.Err) }

// Unwrap returns the failing input's own error.
func (e *BulkError) Unwrap() error { return e.Err }

// CreatePersons creates many persons at once, as CreatePerson creates one
// (the same validation, login uniqueness, user limits, counts and one
// ActPersonCreated record each), for imports of thousands. It works in
// three steps:
//
//  1. Every input is validated, and checked against the logins of the
//     others and the logins already taken, before anything is hashed or
//     written: an input refused here creates nobody.
//  2. Passwords are hashed on the service's bounded hashing slots, as
//     many at once as there are slots. Inputs with NoPassword share one
//     hash of one random secret that is thrown away: nobody can log in
//     as any of them until SetPassword, as with CreatePerson, and a
//     100,000-person import costs one argon2 computation, not 100,000.
//  3. The persons are stored 500 at a time, each batch in one
//     transaction (a smaller one where the engine says kv.ErrTxnTooBig).
//     Logins and user limits are checked again, person by person, inside
//     the transaction, so a concurrent creation or a limit reached part
//     way through is seen exactly.
//
// A batch is all or nothing. On an error in step 3, the persons returned
// are those of the batches committed before it, a prefix of ins in order;
// the failing batch and all later inputs are not created. On an error in
// steps 1 and 2 nothing is created. The error is a *BulkError naming the
// input, except for the context's and the store's own errors.
func (s *Service) CreatePersons(ctx context.Context, ins []PersonInput) ([]Person, error) {
	ps := make([]Person, len(ins))
	pws := make([]string, len(ins))
	seen := make(map[string]int, 2*len(ins))
	for i, in := range ins {
		p, pw, err := s.personOf(in)
		if err != nil {
			return nil, &BulkError{Index: i, Err: err}
		}
		for _, l := range logins(p) {
			if j, dup := seen[foldLogin(l)]; dup {
				return nil, &BulkError{Index: i, Err: fmt.Errorf("%w: %s %q is also person %d's of the batch", ErrExists, loginField(l), l, j)}
			}
			seen[foldLogin(l)] = i
		}
		ps[i] = p
		if !in.NoPassword {
			pws[i] = pw
		}
	}
	if err := s.db.View(ctx, func(tx kv.Txn) error {
		for i := range ps {
			if err := s.checkLoginsFree(tx, 0, ps[i].Username, ps[i].Email); err != nil {
				return &BulkError{Index: i, Err: err}
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if err := s.hashAll(ctx, ps, pws); err != nil {
		return nil, err
	}
	for i := range ps {
		id, err := s.db.NextID(ctx, seqPerson)
		if err != nil {
			return nil, err
		}
		ps[i].ID = id
	}
	done, n := 0, bulkBatch
	for done < len(ps) {
		batch := ps[done:min(done+n, len(ps))]
		err := s.db.Update(ctx, func(tx kv.Txn) error {
			for i := range batch {
				if err := s.insertPerson(tx, &batch[i]); err != nil {
					return &BulkError{Index: done + i, Err: err}
				}
				if err := s.record(ctx, tx, personChange(ActPersonCreated, batch[i])); err != nil {
					return err
				}
			}
			return nil
		})
		if errors.Is(err, kv.ErrTxnTooBig) && n > 1 {
			n /= 2
			continue
		}
		if err != nil {
			return ps[:done], err
		}
		done += len(batch)
	}
	return ps, nil
}

// logins are the distinct logins of p, as the login index holds them.
func logins(p Person) []string {
	if foldLogin(p.Username) == foldLogin(p.Email) {
		return []string{p.Username}
	}
	return []string{p.Username, p.Email}
}

// hashAll sets the PasswordHash of every person in ps: the hash of
// pws[i], or where that is "" the one hash of a random secret shared by
// all persons created without a password. The workers are as many as
// the hashing slots, which bound the memory argon2 takes in any case.
func (s *Service) hashAll(ctx context.Context, ps []Person, pws []string) error {
	var none string
	for i := range ps {
		if pws[i] != "" {
			continue
		}
		if none == "" {
			secret, err := unusablePassword()
			if err != nil {
				return err
			}
			if none, err = s.hashPassword(ctx, secret); err != nil {
				return err
			}
		}
		ps[i].PasswordHash = none
	}
	next := make(chan int)
	errs := make(chan error, cap(s.hashSlots))
	var wg sync.WaitGroup
	for range cap(s.hashSlots) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				h, err := s.hashPassword(ctx, pws[i])
				if err != nil {
					errs <- err
					return
				}
				ps[i].PasswordHash = h
			}
		}()
	}
	var err error
feed:
	for i := range ps {
		if pws[i] == "" {
			continue
		}
		select {
		case next <- i:
		case err = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err == nil && len(errs) > 0 {
		err = <-errs
	}
	return err
}
