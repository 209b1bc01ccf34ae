package share_test

import (
	"context"
	"fmt"
	"testing"

	"berth/account"
	"berth/berthtest"
	"berth/share"
)

// BenchmarkShareAccessWideSubscribers: a subscriber's access to a share
// of 2,000 direct subscribers, which every request into the share asks
// (share.Root): its cost should not follow the number of subscribers.
func BenchmarkShareAccessWideSubscribers(b *testing.B) {
	const n = 2000
	ctx := context.Background()
	st, svc, admin, ps := widePersons(b, n)
	root, err := svc.CreateOrgShare(ctx, admin, st.Org.ID, "Wide")
	if err != nil {
		b.Fatal(err)
	}
	var subs share.Subscribers
	for _, p := range ps {
		subs.Persons = append(subs.Persons, share.Entry{ID: p.ID, Channel: share.ChannelWeb, Role: share.RoleViewer})
	}
	if _, err := svc.SetSubscribers(ctx, admin, st.Org.ID, root.ID, subs); err != nil {
		b.Fatal(err)
	}
	member := caller(b, st, ps[n/2].ID)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := svc.Root(ctx, member, root.ID); err != nil {
			b.Fatal(err)
		}
	}
}

// widePersons is a stack with its share service, an administrator of its
// organization and n persons of it without passwords, made at once.
func widePersons(t testing.TB, n int) (*berthtest.Stack, *share.Service, account.Caller, []account.Person) {
	t.Helper()
	ctx := context.Background()
	st := berthtest.New(t, berthtest.Options{})
	svc := share.New(share.Options{FS: st.FS, Accounts: st.Accounts})
	adm, err := st.Accounts.CreatePerson(ctx, account.PersonInput{OrganizationID: st.Org.ID, Username: "adm",
		Email: "adm@example.com", Password: password, Admin: true})
	if err != nil {
		t.Fatal(err)
	}
	ins := make([]account.PersonInput, n)
	for i := range ins {
		name := fmt.Sprintf("p%05d", i)
		ins[i] = account.PersonInput{OrganizationID: st.Org.ID, Username: name, Email: name + "@example.com", NoPassword: true}
	}
	ps, err := st.Accounts.CreatePersons(ctx, ins)
	if err != nil {
		t.Fatal(err)
	}
	return st, svc, caller(t, st, adm.ID), ps
}
