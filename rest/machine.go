package rest

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"berth/account"
	"berth/share"
	"berth/vfs"
)

// machineRoutes registers the machine routes (spec 4.11). Spec 4.11
// lists none that deletes a machine; berth adds one (docs/api.md "Device
// passwords"), since a device password ends with its machine. What each
// route does on the machine is the agent's (docs/agent.md).
func (s *server) machineRoutes() {
	s.handle("GET /api/2/machine/{machine_id}", s.authed(s.getMachine))
	s.handle("POST /api/2/machine/{machine_id}/delete", s.authed(s.deleteMachine))
	s.handle("GET /api/2/machine/{machine_id}/status", s.authed(s.machineStatus))
	s.handle("POST /api/2/machine/{machine_id}/server/enable", s.authed(s.machineServer(true)))
	s.handle("POST /api/2/machine/{machine_id}/server/disable", s.authed(s.machineServer(false)))
	s.handle("POST /api/2/machine/{machine_id}/ls", s.authed(s.machineLs))
	s.handle("GET /api/2/machine/{machine_id}/mappings", s.authed(s.listMappings))
	s.handle("GET /api/2/machine/{machine_id}/mappings/active", s.authed(s.listActiveMappings))
	s.handle("POST /api/2/machine/{machine_id}/mappings/create", s.authed(s.createMapping))
	s.handle("GET /api/2/machine/{machine_id}/mapping/{mapping_id}", s.authed(s.getMapping))
	s.handle("POST /api/2/machine/{machine_id}/mapping/{mapping_id}/delete", s.authed(s.deleteMapping))
	s.handle("GET /api/2/machine/{machine_id}/backups", s.authed(s.listBackups))
	s.handle("POST /api/2/machine/{machine_id}/backups/create", s.authed(s.createBackup))
	s.handle("GET /api/2/machine/{machine_id}/backup/{root_id}", s.authed(s.getBackup))
	s.handle("POST /api/2/machine/{machine_id}/backup/{root_id}/restore", s.authed(s.restoreBackup))
	s.handle("POST /api/2/machine/{machine_id}/backup/{root_id}/delete", s.authed(s.deleteBackup))
}

// machineOf returns the machine the path names and its person, when the
// caller may do act with that person (their own machine, or a machine of
// a person they administer). A machine out of the caller's sight is 404,
// like one that does not exist.
func (s *server) machineOf(r *http.Request, act share.PersonAction) (account.Machine, account.Person, error) {
	ctx := r.Context()
	id, ok := parseID(r.PathValue("machine_id"))
	if !ok {
		return account.Machine{}, account.Person{}, ErrNotFound
	}
	m, err := s.accounts.Machine(ctx, id)
	if errors.Is(err, account.ErrNotFound) {
		return account.Machine{}, account.Person{}, ErrNotFound
	}
	if err != nil {
		return account.Machine{}, account.Person{}, err
	}
	p, err := s.shares.Person(ctx, callerOf(r), m.PersonID, act)
	if err != nil {
		return account.Machine{}, account.Person{}, err
	}
	return m, p, nil
}

// getMachine answers GET /api/2/machine/{machine_id} (spec 2.12).
func (s *server) getMachine(r *http.Request) (any, error) {
	m, _, err := s.machineOf(r, share.PersonRead)
	if err != nil {
		return nil, err
	}
	return encodeMachine(m), nil
}

// deleteMachine answers POST /api/2/machine/{machine_id}/delete: the
// machine's person, or an administrator who manages them, deletes it,
// which ends the sessions signed in from it and its device passwords at
// the next request. A machine the caller may not see is 404.
func (s *server) deleteMachine(r *http.Request) (any, error) {
	m, _, err := s.machineOf(r, share.PersonUpdateSelf)
	if err != nil {
		return nil, err
	}
	return nil, s.accounts.DeleteMachine(r.Context(), m.ID)
}

// ownerPolicy is the policy the machine's person acts under.
func (s *server) ownerPolicy(ctx context.Context, p account.Person) (account.Policy, error) {
	return s.accounts.EffectivePolicy(ctx, p.OrganizationID)
}

// machineServer answers server/enable and server/disable: whether the
// machine serves folders to mappings. Enabling needs the owner's policy's
// file_server_enabled.
func (s *server) machineServer(on bool) JSONHandler {
	return func(r *http.Request) (any, error) {
		ctx := r.Context()
		m, p, err := s.machineOf(r, share.PersonUpdateSelf)
		if err != nil {
			return nil, err
		}
		if on {
			pol, err := s.ownerPolicy(ctx, p)
			if err != nil {
				return nil, err
			}
			if !pol.FileServerEnabled {
				return nil, Describe(ErrForbidden, "the organization's policy does not allow file servers (file_server_enabled)")
			}
		}
		if _, err := s.accounts.SetFileServer(ctx, m.ID, on); err != nil {
			return nil, err
		}
		s.reconfigure(m.ID)
		return nil, nil
	}
}

// reconfigure tells machine id's agent that its mappings, backups or
// file server changed; it reads them again (docs/agent.md).
func (s *server) reconfigure(id uint64) {
	if err := s.agents.Notify(id, "reconfigure", nil); err != nil {
		s.log.Warn("telling an agent to reconfigure", "machine", id, "error", err)
	}
}

// machineSubscription is one of a machine status's subscriptions, spec
// 4.11's fields (the agent's agent.Subscription).
type machineSubscription struct {
	ExclFiles    int64  `json:"excl_files"`
	RsubID       uint64 `json:"rsub_id"`
	Synced       bool   `json:"synced"`
	SyncedFolder string `json:"synced_folder"`
}

// machineTransfer is one of a machine status's transfers, berth's fields
// (docs/agent.md; the agent's agent.Transfer).
type machineTransfer struct {
	Kind   string `json:"kind"`
	RootID uint64 `json:"root_id"`
	Path   string `json:"path"`
	Bytes  int64  `json:"bytes"`
	Total  int64  `json:"total"`
}

// machineStatus answers GET /api/2/machine/{machine_id}/status with what
// the agent reports now. An offline machine is 503. The answer is the
// machine's word, read into the fields the API has: a compromised agent
// must not put keys or values of its choosing before the administrators
// who read it (an answer of another shape is 503, ErrBadAnswer).
func (s *server) machineStatus(r *http.Request) (any, error) {
	m, _, err := s.machineOf(r, share.PersonRead)
	if err != nil {
		return nil, err
	}
	var st struct {
		Subscriptions []machineSubscription `json:"subscriptions"`
		Synced        bool                  `json:"synced"`
		Transfers     []machineTransfer     `json:"transfers"`
	}
	if err := s.callAgent(r.Context(), m.ID, "status", nil, &st); err != nil {
		return nil, err
	}
	if st.Subscriptions == nil {
		st.Subscriptions = []machineSubscription{}
	}
	if st.Transfers == nil {
		st.Transfers = []machineTransfer{}
	}
	return struct {
		Results any `json:"results"`
	}{st}, nil
}

// machineLs answers POST /api/2/machine/{machine_id}/ls (form field
// path): the names in a folder of the machine. Only folders the machine
// maps or backs up, and what is below them, may be listed
// (docs/agent.md); the agent checks the same again on its side.
func (s *server) machineLs(r *http.Request) (any, error) {
	ctx := r.Context()
	m, owner, err := s.machineOf(r, share.PersonUpdateSelf)
	if err != nil {
		return nil, err
	}
	if err := s.reachesDisk(ctx, callerOf(r), owner, "browse"); err != nil {
		return nil, err
	}
	vals, err := form(r)
	if err != nil {
		return nil, err
	}
	p, err := account.CleanMachinePath("path", vals.Get("path"))
	if err != nil {
		return nil, err
	}
	allowed, err := s.machineFolders(ctx, m.ID)
	if err != nil {
		return nil, err
	}
	if !withinAny(p, allowed) {
		return nil, Describe(ErrForbidden, "only folders the machine maps or backs up, and what is below them, may be listed")
	}
	var out struct {
		Names []string `json:"names"`
	}
	if err := s.callAgent(ctx, m.ID, "ls", map[string]string{"path": p}, &out); err != nil {
		return nil, err
	}
	if out.Names == nil {
		out.Names = []string{}
	}
	return struct {
		Results []string `json:"results"`
	}{out.Names}, nil
}

// reachesDisk returns nil when caller c may reach the disk of machine
// owner's machine: it is c's own, or c administers owner where
// share.BrowsesRemote lets them (admin_browse_remote in the owner's
// organization's policy and in the one c acts under). Another person's
// disk is theirs to open: a listing shows it, a mapping brings the
// folder's files up into a root the administrator reads, a restore
// writes into a folder of the administrator's choosing. what says what
// the administrator asked, for the reason.
func (s *server) reachesDisk(ctx context.Context, c caller, owner account.Person, what string) error {
	if c.Person.ID == owner.ID {
		return nil
	}
	org, err := s.accounts.Organization(ctx, owner.OrganizationID)
	if err != nil {
		return err
	}
	if !share.BrowsesRemote(c, org) {
		return Describe(ErrForbidden, "the policy does not let you %s this person's machine (admin_browse_remote, in their organization's policy and in yours)", what)
	}
	return nil
}

// machineFolders are the folders machine id maps or backs up.
func (s *server) machineFolders(ctx context.Context, id uint64) ([]string, error) {
	var out []string
	mms, err := s.accounts.Mappings(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, mm := range mms {
		out = append(out, mm.Path)
	}
	bs, err := s.accounts.Backups(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, b := range bs {
		out = append(out, b.Path)
	}
	return out, nil
}

func withinAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if account.WithinMachinePath(p, d) {
			return true
		}
	}
	return false
}

// mappingBody is spec 2.13's machine_mapping.
type mappingBody struct {
	ID        uint64  `json:"id"`
	MachineID uint64  `json:"machine_id"`
	Name      string  `json:"name"`
	Path      string  `json:"path"`
	PersonID  *uint64 `json:"person_id"`
	RootID    uint64  `json:"root_id"`
	Share     bool    `json:"share"`
	Type      string  `json:"type"`
}

func encodeMapping(mm account.MachineMapping) mappingBody {
	b := mappingBody{ID: mm.ID, MachineID: mm.MachineID, Name: mm.Name, Path: mm.Path, RootID: mm.RootID, Share: mm.Share, Type: "machine_mapping"}
	if mm.PersonID != 0 {
		id := mm.PersonID
		b.PersonID = &id
	}
	return b
}

// listMappings answers GET /api/2/machine/{machine_id}/mappings.
func (s *server) listMappings(r *http.Request) (any, error) {
	m, _, err := s.machineOf(r, share.PersonRead)
	if err != nil {
		return nil, err
	}
	mms, err := s.accounts.Mappings(r.Context(), m.ID)
	if err != nil {
		return nil, err
	}
	out := make([]mappingBody, 0, len(mms))
	for _, mm := range mms {
		out = append(out, encodeMapping(mm))
	}
	return struct {
		Results []mappingBody `json:"results"`
	}{out}, nil
}

// listActiveMappings answers GET /api/2/machine/{machine_id}/mappings/active
// (berth's own, read by the machine's agent): the mappings in force, as
// /mappings lists them, or none while the machine's file server is off or
// the owner's policy chain withholds file_server_enabled. The agent keeps
// the others' indexes and syncs them again when both are back on.
func (s *server) listActiveMappings(r *http.Request) (any, error) {
	m, p, err := s.machineOf(r, share.PersonRead)
	if err != nil {
		return nil, err
	}
	out := []mappingBody{}
	active := m.FileServer
	if active {
		pol, err := s.ownerPolicy(r.Context(), p)
		if err != nil {
			return nil, err
		}
		active = pol.FileServerEnabled
	}
	if active {
		mms, err := s.accounts.Mappings(r.Context(), m.ID)
		if err != nil {
			return nil, err
		}
		for _, mm := range mms {
			out = append(out, encodeMapping(mm))
		}
	}
	return struct {
		Results []mappingBody `json:"results"`
	}{out}, nil
}

// createMapping answers POST /api/2/machine/{machine_id}/mappings/create
// (form fields path, root_id, name): the machine's folder path is kept in
// step with the root. The machine's file server must be on, the caller
// must be able to write the root, and reach the machine's disk
// (reachesDisk): a mapping made by an administrator brings a folder of
// the person's disk up into a root of the administrator's choosing.
func (s *server) createMapping(r *http.Request) (any, error) {
	ctx := r.Context()
	m, p, err := s.machineOf(r, share.PersonUpdateSelf)
	if err != nil {
		return nil, err
	}
	vals, err := form(r)
	if err != nil {
		return nil, err
	}
	if !m.FileServer {
		return nil, Describe(ErrForbidden, "the machine's file server is off (POST /api/2/machine/%d/server/enable)", m.ID)
	}
	// The policy again: file_server_enabled may have been turned off
	// since the file server was enabled.
	pol, err := s.ownerPolicy(ctx, p)
	if err != nil {
		return nil, err
	}
	if !pol.FileServerEnabled {
		return nil, Describe(ErrForbidden, "the organization's policy does not allow file servers (file_server_enabled)")
	}
	ref, err := required(vals, "root_id")
	if err != nil {
		return nil, err
	}
	rootID, ok := parseID(ref)
	if !ok {
		return nil, Describe(ErrInvalidRequest, "root_id must be a root's id")
	}
	a, err := s.shares.Root(ctx, callerOf(r), rootID)
	if err != nil {
		return nil, err
	}
	if !a.Perms.Has(share.Read | share.Write) {
		return nil, Describe(ErrForbidden, "a mapped root must be one the caller can read and write")
	}
	if err := s.reachesDisk(ctx, callerOf(r), p, "map a folder of"); err != nil {
		// The agent uploads the folder's files into the root and
		// writes the root's into the folder: an administrator's root
		// (an organization share they edit) would open the person's
		// disk to them, which admin_browse_remote keeps closed.
		return nil, err
	}
	if callerOf(r).Person.ID != p.ID {
		// The agent syncs the root as the machine's person: one they
		// cannot read and write is a mapping that never syncs.
		oc, err := s.accounts.Caller(ctx, p.ID)
		if err != nil {
			return nil, err
		}
		oa, err := s.shares.Root(ctx, oc, rootID)
		if err != nil && !errors.Is(err, share.ErrNoRoot) && !errors.Is(err, account.ErrInactive) {
			return nil, err
		}
		if err != nil || !oa.Perms.Has(share.Read|share.Write) {
			return nil, Describe(ErrForbidden, "the machine's person cannot read and write this root, and their agent syncs it as them")
		}
	}
	root, err := s.fs.Root(ctx, rootID)
	if err != nil {
		return nil, err
	}
	if root.Type == vfs.RootBackup {
		return nil, Describe(ErrInvalidRequest, "a backup root cannot be mapped; it belongs to its backup")
	}
	name := vals.Get("name")
	if name == "" {
		name = root.Name
	}
	mm := account.MachineMapping{MachineID: m.ID, Name: name, Path: vals.Get("path"), RootID: rootID, Share: root.Type == vfs.RootShare}
	if !mm.Share {
		mm.PersonID = p.ID
	}
	mm, err = s.accounts.CreateMapping(ctx, mm)
	if errors.Is(err, account.ErrExists) {
		// One tree is kept in step once (docs/api.md "Machines").
		return nil, Describe(err, "the machine already maps this root, or a folder that holds or is inside this one")
	}
	if err != nil {
		return nil, err
	}
	s.reconfigure(m.ID)
	return encodeMapping(mm), nil
}

// getMapping answers GET /api/2/machine/{machine_id}/mapping/{mapping_id}.
func (s *server) getMapping(r *http.Request) (any, error) {
	m, _, err := s.machineOf(r, share.PersonRead)
	if err != nil {
		return nil, err
	}
	id, ok := parseID(r.PathValue("mapping_id"))
	if !ok {
		return nil, ErrNotFound
	}
	mm, err := s.accounts.Mapping(r.Context(), m.ID, id)
	if err != nil {
		return nil, err
	}
	return encodeMapping(mm), nil
}

// deleteMapping answers POST
// /api/2/machine/{machine_id}/mapping/{mapping_id}/delete: the mapping
// ends; the files on both sides stay.
func (s *server) deleteMapping(r *http.Request) (any, error) {
	m, _, err := s.machineOf(r, share.PersonUpdateSelf)
	if err != nil {
		return nil, err
	}
	id, ok := parseID(r.PathValue("mapping_id"))
	if !ok {
		return nil, ErrNotFound
	}
	if err := s.accounts.DeleteMapping(r.Context(), m.ID, id); err != nil {
		return nil, err
	}
	s.reconfigure(m.ID)
	return nil, nil
}

// backupBody is spec 2.14's backup.
type backupBody struct {
	ID        uint64 `json:"id"`
	MachineID uint64 `json:"machine_id"`
	Path      string `json:"path"`
	Type      string `json:"type"`
}

func encodeBackup(b account.Backup) backupBody {
	return backupBody{ID: b.RootID, MachineID: b.MachineID, Path: b.Path, Type: "backup"}
}

// listBackups answers GET /api/2/machine/{machine_id}/backups.
func (s *server) listBackups(r *http.Request) (any, error) {
	m, _, err := s.machineOf(r, share.PersonRead)
	if err != nil {
		return nil, err
	}
	bs, err := s.accounts.Backups(r.Context(), m.ID)
	if err != nil {
		return nil, err
	}
	out := make([]backupBody, 0, len(bs))
	for _, b := range bs {
		out = append(out, encodeBackup(b))
	}
	return struct {
		Results []backupBody `json:"results"`
	}{out}, nil
}

// createBackup answers POST /api/2/machine/{machine_id}/backups/create
// (form fields path, name): a new backup root of the machine's person
// that the agent backs the folder up into. Needs the owner's policy's
// backups_enabled, and user_create_backups when the owner asks (their
// administrators may regardless).
func (s *server) createBackup(r *http.Request) (any, error) {
	ctx := r.Context()
	m, p, err := s.machineOf(r, share.PersonUpdateSelf)
	if err != nil {
		return nil, err
	}
	vals, err := form(r)
	if err != nil {
		return nil, err
	}
	pol, err := s.ownerPolicy(ctx, p)
	if err != nil {
		return nil, err
	}
	if !pol.BackupsEnabled {
		return nil, Describe(ErrForbidden, "the organization's policy does not allow backups (backups_enabled)")
	}
	if callerOf(r).Person.ID == p.ID && !pol.UserCreateBackups {
		return nil, Describe(ErrForbidden, "the organization's policy lets only administrators set up backups (user_create_backups)")
	}
	path, err := account.CleanMachinePath("path", vals.Get("path"))
	if err != nil {
		return nil, err
	}
	name := vals.Get("name")
	if name == "" {
		name = fmt.Sprintf("%s %s", m.DNSName, path)
	}
	root, err := s.shares.NewRoot(ctx, p, name, vfs.RootBackup)
	if err != nil {
		return nil, rootNameError(err)
	}
	b, err := s.accounts.CreateBackup(ctx, account.Backup{RootID: root.ID, MachineID: m.ID, Path: path})
	if err != nil {
		// The root made for it holds nothing yet: it goes again.
		if derr := s.fs.DeleteRoot(context.WithoutCancel(ctx), root.ID); derr != nil {
			s.log.Warn("deleting the root of a backup not made", "root", root.ID, "error", derr)
		}
		if errors.Is(err, account.ErrExists) {
			return nil, Describe(err, "the machine already backs up a folder that holds or is inside this one")
		}
		return nil, err
	}
	s.reconfigure(m.ID)
	return encodeBackup(b), nil
}

// backupOf returns the backup the path names, of a machine the caller may
// do act with.
func (s *server) backupOf(r *http.Request, act share.PersonAction) (account.Machine, account.Backup, error) {
	m, _, err := s.machineOf(r, act)
	if err != nil {
		return m, account.Backup{}, err
	}
	id, ok := parseID(r.PathValue("root_id"))
	if !ok {
		return m, account.Backup{}, ErrNotFound
	}
	b, err := s.accounts.BackupOf(r.Context(), m.ID, id)
	return m, b, err
}

// getBackup answers GET /api/2/machine/{machine_id}/backup/{root_id}.
func (s *server) getBackup(r *http.Request) (any, error) {
	_, b, err := s.backupOf(r, share.PersonRead)
	if err != nil {
		return nil, err
	}
	return encodeBackup(b), nil
}

// restoreBackup answers POST
// /api/2/machine/{machine_id}/backup/{root_id}/restore (form fields path:
// the folder of the backup root to restore, "/" when absent; target: the
// machine folder to write to, the backup's own folder when absent). The
// agent accepts the restore and carries it out in the background;
// status shows its progress. An offline machine is 503.
func (s *server) restoreBackup(r *http.Request) (any, error) {
	ctx := r.Context()
	m, b, err := s.backupOf(r, share.PersonUpdateSelf)
	if err != nil {
		return nil, err
	}
	vals, err := form(r)
	if err != nil {
		return nil, err
	}
	src := vals.Get("path")
	if src == "" {
		src = "/"
	}
	target := b.Path
	if t := vals.Get("target"); t != "" {
		if target, err = account.CleanMachinePath("target", t); err != nil {
			return nil, err
		}
	}
	if !account.WithinMachinePath(target, b.Path) {
		// A folder of the caller's choosing, anywhere on the disk, that
		// the backup root's files are written into.
		owner, err := s.accounts.Person(ctx, m.PersonID)
		if err != nil {
			return nil, err
		}
		if err := s.reachesDisk(ctx, callerOf(r), owner, "restore into a folder outside the backup's on"); err != nil {
			return nil, err
		}
	}
	args := map[string]any{"root_id": b.RootID, "path": src, "target": target}
	if err := s.callAgent(ctx, m.ID, "restore", args, nil); err != nil {
		return nil, err
	}
	b, err = s.accounts.MarkRestored(ctx, m.ID, b.RootID, target)
	if err != nil {
		return nil, err
	}
	return encodeBackup(b), nil
}

// deleteBackup answers POST
// /api/2/machine/{machine_id}/backup/{root_id}/delete: the machine stops
// backing the folder up. The backup root and what it holds stay (delete
// it as any root) so that ending a backup never loses its revisions.
func (s *server) deleteBackup(r *http.Request) (any, error) {
	m, b, err := s.backupOf(r, share.PersonUpdateSelf)
	if err != nil {
		return nil, err
	}
	if err := s.accounts.DeleteBackup(r.Context(), m.ID, b.RootID); err != nil {
		return nil, err
	}
	s.reconfigure(m.ID)
	return nil, nil
}
