package account

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// bulkInputs are n persons of org named prefix0, prefix1, ... without
// passwords.
func bulkInputs(org uint64, prefix string, n int) []PersonInput {
	out := make([]PersonInput, n)
	for i := range out {
		name := fmt.Sprintf("%s%d", prefix, i)
		out[i] = PersonInput{OrganizationID: org, Username: name, Email: name + "@bulk.example", NoPassword: true}
	}
	return out
}

// TestCreatePersons: the bulk creation accepts and refuses what
// CreatePerson does, says which input failed, and leaves created exactly
// the batches it returns, with their counts and one journal record each.
func TestCreatePersons(t *testing.T) {
	defer func(n int) { bulkBatch = n }(bulkBatch)
	bulkBatch = 3
	ctx := context.Background()
	with := func(ins []PersonInput, i int, fn func(*PersonInput)) []PersonInput {
		fn(&ins[i])
		return ins
	}
	for _, tt := range []struct {
		name    string
		limit   int64 // the organization's num_users_maximum; alice counts
		ins     func(org uint64) []PersonInput
		err     error
		index   int // the failing input
		created int // how many persons CreatePersons returns
	}{
		{name: "all", ins: func(org uint64) []PersonInput { return bulkInputs(org, "u", 8) }, created: 8},
		{name: "none", ins: func(org uint64) []PersonInput { return nil }},
		{name: "with passwords", ins: func(org uint64) []PersonInput {
			ins := bulkInputs(org, "u", 5)
			for i := range ins {
				ins[i].NoPassword, ins[i].Password = false, fmt.Sprint(pw, i)
			}
			return ins
		}, created: 5},
		{name: "duplicate username in the batch", ins: func(org uint64) []PersonInput {
			return with(bulkInputs(org, "u", 8), 6, func(in *PersonInput) { in.Username = "U2" })
		}, err: ErrExists, index: 6},
		{name: "username equals another's e-mail", ins: func(org uint64) []PersonInput {
			return with(bulkInputs(org, "u", 8), 5, func(in *PersonInput) { in.Email = "u1@BULK.example" })
		}, err: ErrExists, index: 5},
		{name: "a taken login", ins: func(org uint64) []PersonInput {
			return with(bulkInputs(org, "u", 8), 7, func(in *PersonInput) { in.Username = "alice" })
		}, err: ErrExists, index: 7},
		{name: "a taken e-mail", ins: func(org uint64) []PersonInput {
			return with(bulkInputs(org, "u", 8), 4, func(in *PersonInput) { in.Email = "alice@acme.EXAMPLE" })
		}, err: ErrExists, index: 4},
		{name: "invalid username", ins: func(org uint64) []PersonInput {
			return with(bulkInputs(org, "u", 8), 3, func(in *PersonInput) { in.Username = "a b" })
		}, err: ErrInvalid, index: 3},
		{name: "short password", ins: func(org uint64) []PersonInput {
			return with(bulkInputs(org, "u", 8), 2, func(in *PersonInput) { in.NoPassword, in.Password = false, "x" })
		}, err: ErrInvalid, index: 2},
		{name: "password and NoPassword", ins: func(org uint64) []PersonInput {
			return with(bulkInputs(org, "u", 8), 1, func(in *PersonInput) { in.Password = pw })
		}, err: ErrInvalid, index: 1},
		{name: "no such organization", ins: func(org uint64) []PersonInput {
			return with(bulkInputs(org, "u", 8), 4, func(in *PersonInput) { in.OrganizationID = 9999 })
		}, err: ErrInvalid, index: 4, created: 3},
		// alice and 7 more fill a limit of 8: batches {0,1,2} and
		// {3,4,5} commit; the batch {6,7,8} fails at input 7.
		{name: "user limit crossed mid-batch", limit: 8, ins: func(org uint64) []PersonInput { return bulkInputs(org, "u", 10) },
			err: ErrUserLimitExceeded, index: 7, created: 6},
		{name: "user limit met exactly", limit: 9, ins: func(org uint64) []PersonInput { return bulkInputs(org, "u", 8) }, created: 8},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions()
			j := &txJournal{changes: map[string]Change{}}
			o.Journal = j
			s := newService(t, o)
			org, _ := fixture(t, s)
			if tt.limit > 0 {
				if _, err := s.UpdatePolicy(ctx, org.ID, func(p *Policy) error { p.NumUsersMaximum = tt.limit; return nil }); err != nil {
					t.Fatal(err)
				}
			}
			before := len(j.committed(t, s.db))
			ins := tt.ins(org.ID)
			got, err := s.CreatePersons(ctx, ins)
			if tt.err == nil && err != nil {
				t.Fatal(err)
			}
			if tt.err != nil {
				var be *BulkError
				if !errors.Is(err, tt.err) || !errors.As(err, &be) || be.Index != tt.index {
					t.Fatalf("error %v, want %v at input %d", err, tt.err, tt.index)
				}
			}
			if len(got) != tt.created {
				t.Fatalf("%d persons returned, want %d", len(got), tt.created)
			}
			for i, p := range got {
				if p.ID == 0 || p.Username != ins[i].Username || p.PasswordHash == "" {
					t.Fatalf("person %d: %+v", i, p)
				}
				if stored, err := s.Person(ctx, p.ID); err != nil || stored.Username != p.Username {
					t.Fatalf("stored person %d: %+v %v", i, stored, err)
				}
				if byLogin, err := s.PersonByLogin(ctx, p.Email); err != nil || byLogin.ID != p.ID {
					t.Fatalf("login of person %d: %v", i, err)
				}
			}
			for i := tt.created; i < len(ins); i++ {
				if _, err := s.PersonByLogin(ctx, ins[i].Username); !errors.Is(err, ErrNotFound) && ins[i].Username != "alice" {
					t.Fatalf("input %d was created: %v", i, err)
				}
			}
			direct, _, err := s.Counts(ctx, org.ID)
			if err != nil || direct.Accounts != int64(1+tt.created) {
				t.Fatalf("accounts counted %d, want %d (%v)", direct.Accounts, 1+tt.created, err)
			}
			if _, total, err := s.Persons(ctx, org.ID, 0, 100); err != nil || total != 1+tt.created {
				t.Fatalf("persons listed %d, want %d (%v)", total, 1+tt.created, err)
			}
			// Only committed records count: a failed batch's are rolled
			// back with it.
			recs := j.committed(t, s.db)[before:]
			if len(recs) != tt.created {
				t.Fatalf("%d journal records, want %d", len(recs), tt.created)
			}
			for i, c := range recs {
				want := fmt.Sprintf("on person %d/%d ", org.ID, got[i].ID)
				if !strings.HasPrefix(c, ActPersonCreated+" by ") || !strings.Contains(c, want) {
					t.Fatalf("record %d: %s, want %s %s", i, c, ActPersonCreated, want)
				}
			}
		})
	}
}

// Persons created in bulk log in as persons created one by one do, and
// those created without a password cannot until one is set.
func TestCreatePersonsLogin(t *testing.T) {
	ctx := context.Background()
	s := newService(t, testOptions())
	org, _ := fixture(t, s)
	ins := bulkInputs(org.ID, "u", 4)
	ins[1].NoPassword, ins[1].Password = false, pw
	ins[3].NoPassword, ins[3].Password = false, pw+"!"
	got, err := s.CreatePersons(ctx, ins)
	if err != nil {
		t.Fatal(err)
	}
	for i, try := range []string{pw, pw, pw, pw + "!"} {
		p, err := s.Authenticate(ctx, ins[i].Username, try)
		if ins[i].NoPassword {
			if !errors.Is(err, ErrInvalidCredentials) {
				t.Fatalf("person %d without a password: %v", i, err)
			}
			continue
		}
		if err != nil || p.ID != got[i].ID {
			t.Fatalf("person %d: %v", i, err)
		}
	}
	if err := s.SetPassword(ctx, got[0].ID, pw); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, ins[0].Username, pw); err != nil {
		t.Fatal(err)
	}
}
