package rest

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"berth/account"
	"berth/share"
)

// authSourceRoutes registers the directory server routes: the list is
// the spec's (4.6); the rest are berth's (docs/api.md "Directory
// servers"). Every one is for the administrators of the source's
// organization and of those above it (share.OrgManage).
func (s *server) authSourceRoutes() {
	s.handle("GET /api/2/organization/{org}/auth_sources", s.authed(s.listAuthSources))
	s.handle("POST /api/2/organization/{org}/auth_sources/create", s.authed(s.createAuthSource))
	s.handle("GET /api/2/auth_source/{id}", s.authed(s.getAuthSource))
	s.handle("POST /api/2/auth_source/{id}/update", s.authed(s.updateAuthSource))
	s.handle("POST /api/2/auth_source/{id}/delete", s.authed(s.deleteAuthSource))
	s.handle("POST /api/2/auth_source/{id}/import", s.authed(s.importAuthSource))
}

// authSourceBody is the auth_source object of spec 2.17, exactly these
// fields. port is null for the default port; machine_id and protocol are
// null: berth itself talks to the server, and ssl says over what.
type authSourceBody struct {
	ID        uint64  `json:"id"`
	Host      string  `json:"host"`
	Domain    string  `json:"domain"`
	Login     string  `json:"login"`
	Port      *int    `json:"port"`
	SSL       bool    `json:"ssl"`
	MachineID *uint64 `json:"machine_id"`
	Protocol  *string `json:"protocol"`
	Type      string  `json:"type"`
}

func encodeAuthSource(a account.AuthSource) authSourceBody {
	b := authSourceBody{ID: a.ID, Host: a.Host, Domain: a.Domain, Login: a.Login, SSL: a.SSL, Type: "auth_source"}
	if a.Port != 0 {
		port := a.Port
		b.Port = &port
	}
	return b
}

// importBody answers an import (berth's object): what it did.
type importBody struct {
	AuthSourceID uint64   `json:"auth_source_id"`
	Entries      int      `json:"entries"`
	Created      int      `json:"created"`
	Updated      int      `json:"updated"`
	Enabled      int      `json:"enabled"`
	Disabled     int      `json:"disabled"`
	Unchanged    int      `json:"unchanged"`
	Skipped      []string `json:"skipped"`
	Type         string   `json:"type"`
}

// listAuthSources answers GET /api/2/organization/{id}/auth_sources: the
// organization's own directory servers, paged in id order, whatever its
// ad_enabled (those it had before it was turned off stay listed).
func (s *server) listAuthSources(r *http.Request) (any, error) {
	o, p, err := s.orgPage(r)
	if err != nil {
		return nil, err
	}
	list, total, err := s.accounts.AuthSources(r.Context(), o.ID, p.Offset, p.Limit)
	if err != nil {
		return nil, err
	}
	out := make([]authSourceBody, 0, len(list))
	for _, a := range list {
		out = append(out, encodeAuthSource(a))
	}
	return paged(p, out, total), nil
}

// authSourceFields applies the form's settings to a: host, domain,
// login, password, port ("" or 0 for the default), ssl, base_dn, filter.
// Only the fields present change.
func authSourceFields(f url.Values, a *account.AuthSource) error {
	for name, dst := range map[string]*string{"host": &a.Host, "domain": &a.Domain, "login": &a.Login,
		"password": &a.Password, "base_dn": &a.BaseDN, "filter": &a.Filter} {
		if f.Has(name) {
			*dst = f.Get(name)
		}
	}
	if f.Has("port") {
		a.Port = 0
		if v := f.Get("port"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > 65535 {
				return Describe(ErrInvalidRequest, "port must be a port number from 1 to 65535, or empty for the default (389, 636 with ssl)")
			}
			a.Port = n
		}
	}
	ssl, ok, err := formFlag(f, "ssl")
	if err != nil {
		return err
	}
	if ok {
		a.SSL = ssl
	}
	return nil
}

// createAuthSource answers POST /api/2/organization/{id}/auth_sources/create
// with the new auth_source.
func (s *server) createAuthSource(r *http.Request) (any, error) {
	o, err := s.organization(r, share.OrgManage)
	if err != nil {
		return nil, err
	}
	f, err := accountForm(r)
	if err != nil {
		return nil, err
	}
	var a account.AuthSource
	if err := authSourceFields(f, &a); err != nil {
		return nil, err
	}
	a, err = s.accounts.CreateAuthSource(r.Context(), account.AuthSourceInput{OrganizationID: o.ID, Host: a.Host,
		Domain: a.Domain, Login: a.Login, Password: a.Password, Port: a.Port, SSL: a.SSL, BaseDN: a.BaseDN, Filter: a.Filter})
	if err != nil {
		return nil, err
	}
	return encodeAuthSource(a), nil
}

// authSource is the path's directory server, if the caller manages its
// organization; one out of their sight is 404 as one that does not exist.
func (s *server) authSource(r *http.Request) (account.AuthSource, error) {
	id, ok := parseID(r.PathValue("id"))
	if !ok {
		return account.AuthSource{}, share.ErrNotFound
	}
	a, err := s.accounts.AuthSource(r.Context(), id)
	if err != nil {
		return account.AuthSource{}, err
	}
	if _, err := s.shares.Organization(r.Context(), callerOf(r), a.OrganizationID, share.OrgManage); err != nil {
		return account.AuthSource{}, err
	}
	return a, nil
}

// getAuthSource answers GET /api/2/auth_source/{id}.
func (s *server) getAuthSource(r *http.Request) (any, error) {
	a, err := s.authSource(r)
	if err != nil {
		return nil, err
	}
	return encodeAuthSource(a), nil
}

// updateAuthSource answers POST /api/2/auth_source/{id}/update with the
// changed auth_source; a password left out stays.
func (s *server) updateAuthSource(r *http.Request) (any, error) {
	a, err := s.authSource(r)
	if err != nil {
		return nil, err
	}
	f, err := accountForm(r)
	if err != nil {
		return nil, err
	}
	if err := authSourceFields(f, &account.AuthSource{}); err != nil {
		return nil, err // a bad field is refused before anything changes
	}
	a, err = s.accounts.UpdateAuthSource(r.Context(), a.ID, func(a *account.AuthSource) error { return authSourceFields(f, a) })
	if err != nil {
		return nil, err
	}
	return encodeAuthSource(a), nil
}

// deleteAuthSource answers POST /api/2/auth_source/{id}/delete with
// {status: ok}. The persons imported from it stay, with their files.
func (s *server) deleteAuthSource(r *http.Request) (any, error) {
	a, err := s.authSource(r)
	if err != nil {
		return nil, err
	}
	return nil, s.accounts.DeleteAuthSource(r.Context(), a.ID)
}

// importAuthSource answers POST /api/2/auth_source/{id}/import: the
// import runs now, and the answer says what it did; a server that
// fails is 502 directory_error saying what failed.
func (s *server) importAuthSource(r *http.Request) (any, error) {
	a, err := s.authSource(r)
	if err != nil {
		return nil, err
	}
	rep, err := s.accounts.ImportAuthSource(r.Context(), a.ID)
	// The persons an import made before it failed get their roots too,
	// and so do those an earlier import made whose roots were never
	// made: the next import finds them as its own and would not.
	s.syncRoots(r.Context(), slices.Concat(rep.Created, rep.Rootless))
	if err != nil {
		s.log.Warn("directory import failed", "auth_source", a.ID, "url", a.URL(), "error", err)
		return nil, err
	}
	s.log.Info("directory import", "auth_source", a.ID, "report", rep.String())
	b := importBody{AuthSourceID: a.ID, Entries: rep.Entries, Created: len(rep.Created), Updated: rep.Updated,
		Enabled: rep.Enabled, Disabled: rep.Disabled, Unchanged: rep.Unchanged, Skipped: rep.Skipped, Type: "auth_source_import"}
	if b.Skipped == nil {
		b.Skipped = []string{}
	}
	return b, nil
}

// syncRoots gives each person an import created (or found without one:
// ImportReport.Rootless) their sync root, as person/create does. One that fails is logged: the person exists, and
// POST /api/2/person/<id>/roots/create makes it later.
//
// FirstSyncRoot, not NewRoot: another import running alongside finds the
// persons this one made rootless until their roots are made, and makes
// them too; one of the two must yield.
func (s *server) syncRoots(ctx context.Context, created []account.Person) {
	for _, p := range created {
		if _, _, err := s.shares.FirstSyncRoot(ctx, p); err != nil {
			s.log.Warn("sync root of an imported person not created", "person", p.ID, "error", err)
		}
	}
}
