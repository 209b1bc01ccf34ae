package rest

import (
	"errors"
	"net/http"

	"berth/account"
	"berth/share"
)

// machineRoutes registers the machine routes berth serves. Spec 4.11
// lists none that deletes a machine; berth adds one (docs/api.md "Device
// passwords"), since a device password ends with its machine.
func (s *server) machineRoutes() {
	s.handle("POST /api/2/machine/{machine_id}/delete", s.authed(s.deleteMachine))
}

// deleteMachine answers POST /api/2/machine/{machine_id}/delete: the
// machine's person, or an administrator who manages them, deletes it,
// which ends the sessions signed in from it and its device passwords at
// the next request. A machine the caller may not see is 404.
func (s *server) deleteMachine(r *http.Request) (any, error) {
	ctx := r.Context()
	id, ok := parseID(r.PathValue("machine_id"))
	if !ok {
		return nil, ErrNotFound
	}
	m, err := s.accounts.Machine(ctx, id)
	if errors.Is(err, account.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	if _, err := s.shares.Person(ctx, callerOf(r), m.PersonID, share.PersonUpdateSelf); err != nil {
		return nil, err
	}
	return nil, s.accounts.DeleteMachine(ctx, id)
}
