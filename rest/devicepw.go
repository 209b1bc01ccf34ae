package rest

import (
	"net/http"

	"berth/account"
	"berth/share"
)

// devicePasswordRoutes registers the device password routes (not in the
// spec; docs/api.md "Device passwords"): the passwords an account signs
// in with over WebDAV Basic, one per device, when two-step verification
// keeps its main password out of there.
func (s *server) devicePasswordRoutes() {
	s.handle("GET /api/2/person/{id}/device_passwords", s.authed(s.listDevicePasswords))
	s.handle("POST /api/2/person/{id}/device_passwords/create", s.authed(s.createDevicePassword))
	s.handle("POST /api/2/person/{id}/device_password/{device_password_id}/delete", s.authed(s.revokeDevicePassword))
}

// devicePasswordBody is a device password: never its secret, but in the
// answer that creates it.
type devicePasswordBody struct {
	ID        uint64 `json:"id"`
	Name      string `json:"name"`
	PersonID  uint64 `json:"person_id"`
	MachineID uint64 `json:"machine_id"`
	Created   string `json:"created"`
	// Password is the secret, in create's answer only: berth keeps its
	// hash alone and cannot show it again.
	Password string `json:"password,omitempty"`
	Type     string `json:"type"`
}

func encodeDevicePassword(d account.DevicePassword, secret string) devicePasswordBody {
	return devicePasswordBody{ID: d.ID, Name: d.Name, PersonID: d.PersonID, MachineID: d.MachineID,
		Created: formatDateTime(d.Created), Password: secret, Type: "device_password"}
}

// devicePasswordAccount is the account (person or guest) of the path's
// {id} if the caller may do act with it (share decides).
func (s *server) devicePasswordAccount(r *http.Request, act share.PersonAction) (account.Person, error) {
	id, ok := parseID(r.PathValue("id"))
	if !ok {
		return account.Person{}, ErrNotFound
	}
	return s.shares.Person(r.Context(), callerOf(r), id, act)
}

// listDevicePasswords answers GET /api/2/person/{id}/device_passwords:
// one page of the account's device passwords, in id order, without their
// secrets, for the account and the administrators who manage it.
func (s *server) listDevicePasswords(r *http.Request) (any, error) {
	pg, err := pageOf(r)
	if err != nil {
		return nil, err
	}
	p, err := s.devicePasswordAccount(r, share.PersonRead)
	if err != nil {
		return nil, err
	}
	dps, err := s.accounts.DevicePasswords(r.Context(), p.ID)
	if err != nil {
		return nil, err
	}
	out := []devicePasswordBody{}
	for i := pg.Offset; i < len(dps) && len(out) < pg.Limit; i++ {
		out = append(out, encodeDevicePassword(dps[i], ""))
	}
	return paged(pg, out, len(dps)), nil
}

// createDevicePassword answers POST /api/2/person/{id}/device_passwords/create:
// the account itself makes one, signed in with a token (a full sign-in,
// two-step code included); administrators may list and revoke them but
// not make one, which would be a password to someone else's account.
// Form fields: current_password and name (required); machine_id, a
// machine of the account's to tie it to, or else dns_name, os_type and
// os_version of the machine made for it. The answer holds the password,
// this once.
func (s *server) createDevicePassword(r *http.Request) (any, error) {
	f, err := secretForm(r, "current_password")
	if err != nil {
		return nil, err
	}
	p, err := s.devicePasswordAccount(r, share.PersonRead)
	if err != nil {
		return nil, err
	}
	if p.ID != callerOf(r).Person.ID {
		return nil, Describe(ErrForbidden, "a device password is made by its own account, signed in; administrators may list and revoke them")
	}
	// A device password outlives the token it is made with, and the
	// person's own change of password: the password again, so that a
	// stolen token is not made into one.
	if err := s.reauthenticate(r.Context(), p, formCurrent(f), "make a device password"); err != nil {
		return nil, err
	}
	in := account.DevicePasswordInput{Name: f.Get("name"), Machine: account.MachineInput{
		DNSName: f.Get("dns_name"), OSType: f.Get("os_type"), OSVersion: f.Get("os_version")}}
	if f.Has("machine_id") {
		id, ok := parseID(f.Get("machine_id"))
		if !ok {
			return nil, Describe(ErrInvalidRequest, "machine_id must be a machine id")
		}
		in.MachineID = id
	}
	dp, secret, err := s.accounts.CreateDevicePassword(r.Context(), p.ID, in)
	if err != nil {
		return nil, err
	}
	return encodeDevicePassword(dp, secret), nil
}

// revokeDevicePassword answers POST
// /api/2/person/{id}/device_password/{device_password_id}/delete: the
// account or an administrator who manages it revokes it; it fails from
// the next request on. Its machine stays.
func (s *server) revokeDevicePassword(r *http.Request) (any, error) {
	p, err := s.devicePasswordAccount(r, share.PersonUpdateSelf)
	if err != nil {
		return nil, err
	}
	id, ok := parseID(r.PathValue("device_password_id"))
	if !ok {
		return nil, ErrNotFound
	}
	return nil, s.accounts.RevokeDevicePassword(r.Context(), p.ID, id)
}
