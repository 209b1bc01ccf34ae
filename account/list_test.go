package account

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestLists(t *testing.T) {
	ctx := context.Background()
	s := newService(t, testOptions())
	org, alice := fixture(t, s)
	for i := range 4 {
		if _, err := s.CreatePerson(ctx, PersonInput{OrganizationID: org.ID, Username: fmt.Sprintf("u%d", i),
			Email: fmt.Sprintf("u%d@acme.example", i), Password: pw}); err != nil {
			t.Fatal(err)
		}
	}
	page, total, err := s.Persons(ctx, org.ID, 1, 2)
	if err != nil || total != 5 || len(page) != 2 || page[0].Username != "u0" || page[1].Username != "u1" {
		t.Fatalf("Persons = %v, %d, %v", page, total, err)
	}
	if _, _, err := s.Persons(ctx, 999, 0, 10); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Persons of missing org: %v", err)
	}
	a, _ := s.UpsertMachine(ctx, alice.ID, MachineInput{DNSName: "a"})
	b, _ := s.UpsertMachine(ctx, alice.ID, MachineInput{DNSName: "b"})
	ms, err := s.Machines(ctx, alice.ID)
	if err != nil || len(ms) != 2 || ms[0].ID != a.ID || ms[1].ID != b.ID {
		t.Fatalf("Machines = %v, %v", ms, err)
	}
}
