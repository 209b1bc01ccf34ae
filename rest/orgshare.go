package rest

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"berth/share"
)

// orgShareRoutes are spec 4.7's organization shares. share decides who
// may do what (the organization's administrators manage its shares); the
// share's files are reached through the file routes like any root's.
func (s *server) orgShareRoutes() {
	s.handle("GET /api/2/organization/{org}/shares", s.authed(s.listOrgShares))
	s.handle("POST /api/2/organization/{org}/shares/create", s.authed(s.createOrgShare))
	s.handle("GET /api/2/organization/{org}/share/{root_id}", s.authed(s.getOrgShare))
	s.handle("POST /api/2/organization/{org}/share/{root_id}/update", s.authed(s.updateOrgShare))
	s.handle("GET /api/2/organization/{org}/share/{root_id}/subscribers", s.authed(s.getOrgShareSubscribers))
	s.handle("POST /api/2/organization/{org}/share/{root_id}/subscribers/update", s.authed(s.updateOrgShareSubscribers))
	s.handle("POST /api/2/organization/{org}/share/{root_id}/delete", s.authed(s.deleteOrgShare))
	s.handlePublic("POST /api/2/shares/accept", s.acceptInvitation)
}

// orgShareIDs are the path's organization and share ids; one that is not
// an id names nothing.
func orgShareIDs(r *http.Request) (org, root uint64, err error) {
	org, ok := parseID(r.PathValue("org"))
	if !ok {
		return 0, 0, share.ErrNotFound
	}
	if v := r.PathValue("root_id"); v != "" {
		if root, ok = parseID(v); !ok {
			return 0, 0, share.ErrNoRoot
		}
	}
	return org, root, nil
}

// orgShare reads the path's organization and share and checks, through
// share.OrgShare, that the caller manages that share, before anything of
// the request is read.
func (s *server) orgShare(r *http.Request) (org, root uint64, err error) {
	if org, root, err = orgShareIDs(r); err != nil {
		return 0, 0, err
	}
	_, err = s.shares.OrgShare(r.Context(), callerOf(r), org, root)
	return org, root, err
}

// listOrgShares answers GET .../shares: the organization's own shares,
// paged in id order, as root objects.
func (s *server) listOrgShares(r *http.Request) (any, error) {
	org, _, err := orgShareIDs(r)
	if err != nil {
		return nil, err
	}
	p, err := pageOf(r)
	if err != nil {
		return nil, err
	}
	roots, total, err := s.shares.OrgShares(r.Context(), callerOf(r), org, p.Offset, p.Limit)
	if err != nil {
		return nil, err
	}
	out := make([]rootJSON, 0, len(roots))
	for _, root := range roots {
		rj, err := s.orgRoot(r.Context(), callerOf(r), root.ID)
		if err != nil {
			return nil, err
		}
		out = append(out, rj)
	}
	return paged(p, out, total), nil
}

// createOrgShare answers POST .../shares/create with form field name.
func (s *server) createOrgShare(r *http.Request) (any, error) {
	org, _, err := orgShareIDs(r)
	if err != nil {
		return nil, err
	}
	if _, err := s.shares.Organization(r.Context(), callerOf(r), org, share.OrgManage); err != nil {
		return nil, err
	}
	vals, err := form(r)
	if err != nil {
		return nil, err
	}
	name, err := required(vals, "name")
	if err != nil {
		return nil, err
	}
	root, err := s.shares.CreateOrgShare(r.Context(), callerOf(r), org, name)
	if err != nil {
		return nil, rootNameError(err)
	}
	return s.orgRoot(r.Context(), callerOf(r), root.ID)
}

// getOrgShare answers GET .../share/{root_id}.
func (s *server) getOrgShare(r *http.Request) (any, error) {
	_, id, err := s.orgShare(r)
	if err != nil {
		return nil, err
	}
	return s.orgRoot(r.Context(), callerOf(r), id)
}

// updateOrgShare answers POST .../share/{root_id}/update with form field
// name.
func (s *server) updateOrgShare(r *http.Request) (any, error) {
	org, id, err := s.orgShare(r)
	if err != nil {
		return nil, err
	}
	vals, err := form(r)
	if err != nil {
		return nil, err
	}
	name, err := required(vals, "name")
	if err != nil {
		return nil, err
	}
	if _, err := s.shares.RenameOrgShare(r.Context(), callerOf(r), org, id, name); err != nil {
		return nil, rootNameError(err)
	}
	return s.orgRoot(r.Context(), callerOf(r), id)
}

// deleteOrgShare answers POST .../share/{root_id}/delete; its files then
// answer 410 root_deleted to its subscribers.
func (s *server) deleteOrgShare(r *http.Request) (any, error) {
	org, id, err := orgShareIDs(r)
	if err != nil {
		return nil, err
	}
	return nil, s.shares.DeleteOrgShare(r.Context(), callerOf(r), org, id)
}

// subscribersJSON is spec 4.7's subscribers shape.
type subscribersJSON struct {
	ExternalSubscribers map[string]string `json:"external_subscribers"`
	Subscribers         triples           `json:"subscribers"`
	GroupSubscribers    triples           `json:"group_subscribers"`
	FromGroup           triples           `json:"from_group"`
}

// triples are subscriber entries as spec 4.7's [id, channel, role]
// arrays. They write themselves: from_group lists every person a group
// subscriber reaches, and a triple as [3]any boxed three values and went
// through reflection, several times the answer's size in garbage.
// Channels and roles are among fixed ASCII names (share.Channel*,
// share.Role*), which Go and JSON quote alike.
type triples []share.Entry

// MarshalJSON writes the triples as one JSON array (never null).
func (ts triples) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 2+len(ts)*32)
	b = append(b, '[')
	for i, t := range ts {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = strconv.AppendUint(b, t.ID, 10)
		b = append(b, ',')
		b = strconv.AppendQuote(b, t.Channel)
		b = append(b, ',')
		b = strconv.AppendQuote(b, t.Role)
		b = append(b, ']')
	}
	return append(b, ']'), nil
}

// getOrgShareSubscribers answers GET .../share/{root_id}/subscribers.
func (s *server) getOrgShareSubscribers(r *http.Request) (any, error) {
	_, id, err := s.orgShare(r)
	if err != nil {
		return nil, err
	}
	return s.subscribersBody(r, id)
}

func (s *server) subscribersBody(r *http.Request, id uint64) (any, error) {
	subs, err := s.shares.Subscribers(r.Context(), id)
	if err != nil {
		return nil, err
	}
	from, err := s.shares.FromGroup(r.Context(), subs)
	if err != nil {
		return nil, err
	}
	return subscribersJSON{
		ExternalSubscribers: subs.External,
		Subscribers:         triples(subs.Persons),
		GroupSubscribers:    triples(subs.Groups),
		FromGroup:           triples(from),
	}, nil
}

// updateOrgShareSubscribers answers POST .../share/{root_id}/subscribers/update.
// Form fields (docs/api.md): subscribers and group_subscribers, each a
// JSON array of [id, channel, role] triples, and external_subscribers, a
// JSON array of e-mail addresses; each one sent replaces that list, one
// left out keeps it. It answers the subscribers shape, as GET does.
func (s *server) updateOrgShareSubscribers(r *http.Request) (any, error) {
	org, id, err := s.orgShare(r)
	if err != nil {
		return nil, err
	}
	vals, err := form(r)
	if err != nil {
		return nil, err
	}
	subs, err := s.shares.Subscribers(r.Context(), id)
	if err != nil {
		return nil, err
	}
	if subs.Persons, err = triplesField(vals, "subscribers", subs.Persons); err != nil {
		return nil, err
	}
	if subs.Groups, err = triplesField(vals, "group_subscribers", subs.Groups); err != nil {
		return nil, err
	}
	if v, ok := vals["external_subscribers"]; ok && len(v) > 0 {
		var emails []string
		if err := json.Unmarshal([]byte(v[0]), &emails); err != nil {
			return nil, Describe(ErrInvalidRequest, "external_subscribers: a JSON array of e-mail addresses")
		}
		ext := map[string]string{}
		for _, e := range emails {
			ext[e] = subs.External[e]
		}
		subs.External = ext
	}
	invites, err := s.shares.SetSubscribers(r.Context(), callerOf(r), org, id, subs)
	if err != nil {
		return nil, err
	}
	if s.opts.Invite != nil {
		for _, inv := range invites {
			if err := s.opts.Invite(r.Context(), inv); err != nil {
				s.log.Error("share invitation not delivered", "root_id", inv.RootID, "err", err)
			}
		}
	}
	return s.subscribersBody(r, id)
}

// acceptInvitation answers POST /api/2/shares/accept with form field
// token, the invitation an external subscriber was sent: it takes no
// access token (the invitation is the credential) and answers
// {root_id, email}; an unknown or revoked token is 404 not_found.
func (s *server) acceptInvitation(r *http.Request) (any, error) {
	vals, err := form(r)
	if err != nil {
		return nil, err
	}
	tok, err := required(vals, "token")
	if err != nil {
		return nil, err
	}
	inv, err := s.shares.AcceptInvitation(r.Context(), tok)
	if err != nil {
		return nil, err
	}
	return struct {
		RootID uint64 `json:"root_id"`
		Email  string `json:"email"`
	}{inv.RootID, inv.Email}, nil
}

// triplesField reads form field name as a JSON array of [id, channel,
// role] triples; absent, it is old.
func triplesField(vals url.Values, name string, old []share.Entry) ([]share.Entry, error) {
	v, ok := vals[name]
	if !ok || len(v) == 0 {
		return old, nil
	}
	var raw [][3]json.RawMessage
	bad := Describe(ErrInvalidRequest, "%s: a JSON array of [id, channel, role] triples, e.g. [[12, \"web\", \"COLLABORATOR\"]]", name)
	if err := json.Unmarshal([]byte(v[0]), &raw); err != nil {
		return nil, bad
	}
	out := make([]share.Entry, 0, len(raw))
	for _, t := range raw {
		var sub share.Entry
		if json.Unmarshal(t[0], &sub.ID) != nil || json.Unmarshal(t[1], &sub.Channel) != nil ||
			json.Unmarshal(t[2], &sub.Role) != nil || sub.ID == 0 {
			return nil, bad
		}
		if !slices.Contains(out, sub) {
			out = append(out, sub)
		}
	}
	return out, nil
}
