package rest

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"berth/account"
	"berth/share"
)

// groupRoutes registers the group routes of spec 4.10 and the
// organization's list of groups (4.6).
//
// Who may do what (docs/api.md, "Groups"): the administrators of the
// group's organization and of those above it (share.OrgManage) create,
// update and delete groups and change their members; they and the
// group's own members, direct or through member groups, read the group
// and its members. Everyone else gets what share answers for the
// organization: 404 when it is out of their sight, 403 when it is their
// own.
func (s *server) groupRoutes() {
	s.handle("POST /api/2/group/create", s.authed(s.createGroup))
	s.handle("GET /api/2/group/{group_id}", s.authed(s.getGroup))
	s.handle("POST /api/2/group/{group_id}/update", s.authed(s.updateGroup))
	s.handle("GET /api/2/group/{group_id}/members", s.authed(s.getGroupMembers))
	s.handle("POST /api/2/group/{group_id}/members/update", s.authed(s.updateGroupMembers))
	s.handle("POST /api/2/group/{group_id}/delete", s.authed(s.deleteGroup))
	s.handle("GET /api/2/organization/{organization_id}/groups", s.authed(s.organizationGroups))
}

// groupBody is the group object of spec 2.11, exactly these fields.
type groupBody struct {
	ID        uint64 `json:"id"`
	CompanyID uint64 `json:"company_id"`
	Name      string `json:"name"`
	Created   string `json:"created"`
	Active    bool   `json:"active"`
	Type      string `json:"type"`
}

func encodeGroup(g account.Group) groupBody {
	return groupBody{
		ID:        g.ID,
		CompanyID: g.OrganizationID,
		Name:      g.Name,
		Created:   formatDateTime(g.Created),
		Active:    g.Active,
		Type:      "group",
	}
}

// membersBody is the answer of GET /api/2/group/<id>/members (spec
// 4.10): four integer arrays, never null.
type membersBody struct {
	Members               []uint64 `json:"members"`
	MembersFromGroup      []uint64 `json:"members_from_group"`
	MemberGroups          []uint64 `json:"member_groups"`
	MemberGroupsFromGroup []uint64 `json:"member_groups_from_group"`
}

// groupAccess is what a caller asks to do with a group.
type groupAccess int

const (
	groupRead   groupAccess = iota // the group's administrators and members
	groupManage                    // the group's administrators only
)

// group returns the group the path names if the caller may do act with
// it. The organization's rule is share's (OrgManage on the group's
// organization); a caller it refuses still reads a group they are a
// member of. A group that does not exist and one out of the caller's
// sight are the same 404.
func (s *server) group(r *http.Request, act groupAccess) (account.Group, error) {
	id, err := strconv.ParseUint(r.PathValue("group_id"), 10, 64)
	if err != nil || id == 0 {
		return account.Group{}, share.ErrNotFound
	}
	ctx := r.Context()
	g, err := s.accounts.Group(ctx, id)
	if errors.Is(err, account.ErrNotFound) {
		return account.Group{}, share.ErrNotFound
	}
	if err != nil {
		return account.Group{}, err
	}
	c := callerOf(r)
	_, err = s.shares.Organization(ctx, c, g.OrganizationID, share.OrgManage)
	if err == nil {
		return g, nil
	}
	if act == groupRead && (errors.Is(err, share.ErrForbidden) || errors.Is(err, share.ErrNotFound)) {
		in, ierr := s.accounts.InGroup(ctx, g.ID, c.Person.ID)
		if ierr != nil {
			return account.Group{}, ierr
		}
		if in {
			return g, nil
		}
		if errors.Is(err, share.ErrForbidden) {
			return account.Group{}, Describe(ErrForbidden, "only the organization's administrators and the group's members read a group")
		}
	}
	return account.Group{}, err
}

// createGroup answers POST /api/2/group/create: form fields name
// (required) and company_id (the organization, default the caller's).
func (s *server) createGroup(r *http.Request) (any, error) {
	f, err := form(r)
	if err != nil {
		return nil, err
	}
	c := callerOf(r)
	org := c.Person.OrganizationID
	if v := f.Get("company_id"); v != "" || f.Has("company_id") {
		if org, err = strconv.ParseUint(v, 10, 64); err != nil || org == 0 {
			return nil, Describe(ErrInvalidRequest, "company_id must be an organization id")
		}
	}
	if _, err := s.shares.Organization(r.Context(), c, org, share.OrgManage); err != nil {
		return nil, err
	}
	g, err := s.accounts.CreateGroup(r.Context(), account.GroupInput{OrganizationID: org, Name: f.Get("name")})
	if err != nil {
		return nil, err
	}
	return encodeGroup(g), nil
}

// getGroup answers GET /api/2/group/<id>.
func (s *server) getGroup(r *http.Request) (any, error) {
	g, err := s.group(r, groupRead)
	if err != nil {
		return nil, err
	}
	return encodeGroup(g), nil
}

// updateGroup answers POST /api/2/group/<id>/update: form fields name
// and active (true or false, as every boolean parameter), each optional;
// what is left out stays.
func (s *server) updateGroup(r *http.Request) (any, error) {
	g, err := s.group(r, groupManage)
	if err != nil {
		return nil, err
	}
	f, err := form(r)
	if err != nil {
		return nil, err
	}
	var u account.GroupUpdate
	if f.Has("name") {
		name := f.Get("name")
		u.Name = &name
	}
	if f.Has("active") {
		active, err := boolParam(f, "active")
		if err != nil {
			return nil, err
		}
		u.Active = &active
	}
	g, err = s.accounts.UpdateGroup(r.Context(), g.ID, u)
	if err != nil {
		return nil, err
	}
	return encodeGroup(g), nil
}

// getGroupMembers answers GET /api/2/group/<id>/members: the persons
// and groups reached through member groups only with
// include_from_group=true.
func (s *server) getGroupMembers(r *http.Request) (any, error) {
	g, err := s.group(r, groupRead)
	if err != nil {
		return nil, err
	}
	q, err := query(r)
	if err != nil {
		return nil, err
	}
	from, err := boolParam(q, "include_from_group")
	if err != nil {
		return nil, err
	}
	m, err := s.accounts.Members(r.Context(), g.ID, from)
	if err != nil {
		return nil, err
	}
	return membersBody{
		Members:               m.Persons,
		MembersFromGroup:      m.PersonsFromGroups,
		MemberGroups:          m.Groups,
		MemberGroupsFromGroup: m.GroupsFromGroups,
	}, nil
}

// memberFields are the form fields of members/update, each a list of
// ids separated by commas (and/or the field repeated).
var memberFields = []string{"add_members", "remove_members", "add_groups", "remove_groups"}

// updateGroupMembers answers POST /api/2/group/<id>/members/update.
func (s *server) updateGroupMembers(r *http.Request) (any, error) {
	g, err := s.group(r, groupManage)
	if err != nil {
		return nil, err
	}
	f, err := form(r)
	if err != nil {
		return nil, err
	}
	lists := make([][]uint64, len(memberFields))
	given := false
	for i, name := range memberFields {
		given = given || f.Has(name)
		if lists[i], err = formIDs(f, name); err != nil {
			return nil, err
		}
	}
	if !given {
		return nil, Describe(ErrInvalidRequest, "give at least one of %s", strings.Join(memberFields, ", "))
	}
	ch := account.MembersChange{AddPersons: lists[0], RemovePersons: lists[1], AddGroups: lists[2], RemoveGroups: lists[3]}
	if _, err := s.accounts.UpdateMembers(r.Context(), g.ID, ch); err != nil {
		return nil, err
	}
	return nil, nil
}

// deleteGroup answers POST /api/2/group/<id>/delete.
func (s *server) deleteGroup(r *http.Request) (any, error) {
	g, err := s.group(r, groupManage)
	if err != nil {
		return nil, err
	}
	return nil, s.accounts.DeleteGroup(r.Context(), g.ID)
}

// organizationGroups answers GET /api/2/organization/<id>/groups, a
// paged list of the groups of the organization itself (not of those
// below it), in id order.
func (s *server) organizationGroups(r *http.Request) (any, error) {
	id, err := strconv.ParseUint(r.PathValue("organization_id"), 10, 64)
	if err != nil || id == 0 {
		return nil, share.ErrNotFound
	}
	if _, err := s.shares.Organization(r.Context(), callerOf(r), id, share.OrgManage); err != nil {
		return nil, err
	}
	p, err := pageOf(r)
	if err != nil {
		return nil, err
	}
	groups, total, err := s.accounts.Groups(r.Context(), id, p.Offset, p.Limit)
	if err != nil {
		return nil, err
	}
	out := make([]groupBody, len(groups))
	for i, g := range groups {
		out[i] = encodeGroup(g)
	}
	return paged(p, out, total), nil
}

// formIDs reads field name of f as ids separated by commas, in every
// value the field is given; blanks around ids and empty items are
// ignored, anything else that is not a positive integer is 400
// invalid_request naming the field.
func formIDs(f url.Values, name string) ([]uint64, error) {
	var ids []uint64
	for _, v := range f[name] {
		for item := range strings.SplitSeq(v, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			id, err := strconv.ParseUint(item, 10, 64)
			if err != nil || id == 0 {
				return nil, Describe(ErrInvalidRequest, "%s must be ids separated by commas; %q is not an id", name, item)
			}
			ids = append(ids, id)
		}
	}
	return ids, nil
}
