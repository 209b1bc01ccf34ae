package rest

import (
	"net/http"

	"berth/account"
	"berth/share"
)

// guestRoutes registers the guest routes of spec 4.9 (a guest's shares
// come with sharing) and the organization's list of guests.
func (s *server) guestRoutes() {
	s.handle("GET /api/2/guest/{ref}", s.authed(s.getGuest))
	s.handle("POST /api/2/guest/create", s.authed(s.createGuest))
	s.handle("POST /api/2/guest/{id}/update", s.authed(s.updateGuest))
	s.handle("POST /api/2/guest/{id}/delete", s.authed(s.deleteGuest))
	s.handle("POST /api/2/guest/{id}/convert", s.authed(s.convertGuest))
	s.handle("GET /api/2/organization/{org}/guests", s.authed(s.organizationGuests))
}

// guestBody is the guest object of spec 2.10, exactly these fields.
type guestBody struct {
	ID        uint64 `json:"id"`
	CompanyID uint64 `json:"company_id"`
	CreatorID uint64 `json:"creator_id"`
	Email     string `json:"email"`
	FirstName string `json:"first_name"`
	LastName  string `json:"last_name"`
	Active    bool   `json:"active"`
	Created   string `json:"created"`
	Type      string `json:"type"`
}

func encodeGuest(p account.Person) guestBody {
	return guestBody{
		ID:        p.ID,
		CompanyID: p.OrganizationID,
		CreatorID: p.CreatorID,
		Email:     p.Email,
		FirstName: p.FirstName,
		LastName:  p.LastName,
		Active:    p.Active,
		Created:   formatDateTime(p.Created),
		Type:      "guest",
	}
}

// getGuest answers GET /api/2/guest/{id or e-mail}: the guest itself and
// the administrators of its organization read it (share.Person); a
// person's id is 404 here.
func (s *server) getGuest(r *http.Request) (any, error) {
	g, err := s.personOrGuest(r, r.PathValue("ref"), true, share.PersonRead)
	if err != nil {
		return nil, err
	}
	return encodeGuest(g), nil
}

// createGuest answers POST /api/2/guest/create. Form fields: email
// (also the guest's login), first_name, last_name, password (optional, as
// for persons), company_id (default: the caller's organization). A person
// creates guests in their own organization when the policy they act
// under (its own tightened by its ancestors') lets persons share
// (user_create_shares); administrators create them wherever they
// create persons (share.OrgCreateUsers).
func (s *server) createGuest(r *http.Request) (any, error) {
	c := callerOf(r)
	ctx := r.Context()
	f, err := accountForm(r)
	if err != nil {
		return nil, err
	}
	orgID, err := companyID(f, c)
	if err != nil {
		return nil, err
	}
	org, err := s.shares.Organization(ctx, c, orgID, share.OrgRead)
	if err != nil {
		return nil, err
	}
	// The caller's policy is their organization's tightened by every
	// ancestor's: org's own alone let a child's persons make guests
	// where a parent withholds sharing.
	sharer := !c.Person.Guest && org.ID == c.Person.OrganizationID && c.Organization.Policy.UserCreateShares
	if !sharer {
		if _, err := s.shares.Organization(ctx, c, orgID, share.OrgCreateUsers); err != nil {
			return nil, err
		}
	}
	g, err := s.accounts.CreateGuest(ctx, account.GuestInput{
		CreatorID:      c.Person.ID,
		OrganizationID: orgID,
		Email:          f.Get("email"),
		FirstName:      f.Get("first_name"),
		LastName:       f.Get("last_name"),
		Password:       f.Get("password"),
	})
	if err != nil {
		return nil, err
	}
	return encodeGuest(g), nil
}

// updateGuest answers POST /api/2/guest/{id}/update. Form fields: email
// (the login follows it), first_name, last_name (the guest and its
// administrators); active (administrators); password (as for persons:
// the guest's own with current_password, another's by an administrator).
func (s *server) updateGuest(r *http.Request) (any, error) {
	f, err := accountForm(r)
	if err != nil {
		return nil, err
	}
	g, err := s.personOrGuest(r, r.PathValue("id"), true, share.PersonUpdateSelf)
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"company_id", "username", "display_name", "admin", "space_quota"} {
		if f.Has(name) {
			return nil, Describe(ErrInvalidRequest, "%s is not a field of a guest", name)
		}
	}
	ch, err := readChanges(f, true)
	if err != nil {
		return nil, err
	}
	if g, err = s.applyChanges(r, g, ch); err != nil {
		return nil, err
	}
	return encodeGuest(g), nil
}

// deleteGuest answers POST /api/2/guest/{id}/delete, for those who may
// delete persons there; the guest's sessions end with it.
func (s *server) deleteGuest(r *http.Request) (any, error) {
	g, err := s.personOrGuest(r, r.PathValue("id"), true, share.PersonDelete)
	if err != nil {
		return nil, err
	}
	return nil, s.accounts.DeleteGuest(r.Context(), g.ID)
}

// convertGuest answers POST /api/2/guest/{id}/convert: the guest becomes
// a person with the same id, login and password, then gets a sync root;
// 200 is the person object. 409 user_limit_exceeded when the
// organization, or one above it, holds its num_users_maximum.
func (s *server) convertGuest(r *http.Request) (any, error) {
	ctx := r.Context()
	g, err := s.personOrGuest(r, r.PathValue("id"), true, share.PersonDelete)
	if err != nil {
		return nil, err
	}
	p, err := s.accounts.ConvertGuest(ctx, g.ID)
	if err != nil {
		return nil, err
	}
	return s.withSyncRoot(ctx, callerOf(r), p)
}

// organizationGuests answers GET /api/2/organization/{org}/guests, one
// page, for the organization's administrators and those above them.
func (s *server) organizationGuests(r *http.Request) (any, error) {
	org, pg, err := s.orgPage(r)
	if err != nil {
		return nil, err
	}
	gs, total, err := s.accounts.Guests(r.Context(), org.ID, pg.Offset, pg.Limit)
	if err != nil {
		return nil, err
	}
	out := make([]guestBody, 0, len(gs))
	for _, g := range gs {
		out = append(out, encodeGuest(g))
	}
	return paged(pg, out, total), nil
}
