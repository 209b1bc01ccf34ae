package account

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"berth/kv"
)

// MachineMapping is a folder of a file-server-enabled machine kept in
// step with a root (spec 2.13).
type MachineMapping struct {
	ID        uint64 `cbor:"1,keyasint"`
	MachineID uint64 `cbor:"2,keyasint"`
	// Name is the mapping's display name (the root's name when not
	// given).
	Name string `cbor:"3,keyasint"`
	// Path is the folder on the machine, absolute and clean, in the
	// machine's own form (slashes; a Windows drive as /C:/...).
	Path string `cbor:"4,keyasint"`
	// PersonID is the account whose root is mapped, 0 (null) for a
	// share.
	PersonID uint64    `cbor:"5,keyasint"`
	RootID   uint64    `cbor:"6,keyasint"`
	Share    bool      `cbor:"7,keyasint"`
	Created  time.Time `cbor:"8,keyasint"`
}

// Backup is a backup root and the folder of a machine it backs up (spec
// 2.14). Its id is the root's.
type Backup struct {
	RootID    uint64    `cbor:"1,keyasint"`
	MachineID uint64    `cbor:"2,keyasint"`
	Path      string    `cbor:"3,keyasint"`
	Created   time.Time `cbor:"4,keyasint"`
	// Restored is when a restore was last asked for (nil: never).
	Restored *time.Time `cbor:"5,keyasint"`
}

// MaxMachinePath bounds a machine path; longer ones no file system
// berth's agents run on accepts.
const MaxMachinePath = 4096

// CleanMachinePath checks a path on a machine given by a client and
// returns its clean form: absolute, slash-separated, no "." or ".."
// segments, no control characters. Errors: ErrInvalid naming field.
func CleanMachinePath(field, p string) (string, error) {
	if p == "" {
		return "", invalid(field, "required")
	}
	if len(p) > MaxMachinePath || hasControl(p) {
		return "", invalid(field, "longer than 4096 bytes or has control characters")
	}
	p = strings.ReplaceAll(p, `\`, "/")
	if len(p) >= 2 && p[1] == ':' {
		p = "/" + p // C:/Users -> /C:/Users
	}
	if !strings.HasPrefix(p, "/") {
		return "", invalid(field, "must be an absolute path")
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == ".." {
			return "", invalid(field, `must not hold ".."`)
		}
	}
	return path.Clean(p), nil
}

// WithinMachinePath reports whether p is dir or below it (both clean).
func WithinMachinePath(p, dir string) bool {
	if dir == "/" {
		return true
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// SetFileServer turns machine id's file server on or off and returns
// the machine. Errors: ErrNotFound.
func (s *Service) SetFileServer(ctx context.Context, id uint64, on bool) (Machine, error) {
	var m Machine
	err := s.db.Update(ctx, func(tx kv.Txn) error {
		if err := s.get(tx, key(pfxMachine, id), &m, notFoundf("machine %d", id)); err != nil {
			return err
		}
		if m.FileServer == on {
			return nil
		}
		m.FileServer = on
		if err := s.put(tx, key(pfxMachine, id), &m); err != nil {
			return err
		}
		return s.recordMachine(ctx, tx, ActMachineServerChanged, m, 0, map[bool]string{true: "file server on", false: "file server off"}[on])
	})
	return m, err
}

// recordMachine records activity on machine m (and root rootID when not
// 0).
func (s *Service) recordMachine(ctx context.Context, tx kv.Txn, activity string, m Machine, rootID uint64, data string) error {
	var p Person
	if err := s.get(tx, key(pfxPerson, m.PersonID), &p, notFoundf("person %d", m.PersonID)); err != nil {
		return err
	}
	c := machineChange(activity, p, m)
	c.OnRootID = rootID
	c.Data = data
	return s.record(ctx, tx, c)
}

// CreateMapping records mapping mm (its ID, Created set here) of a
// machine that exists. Checking who may map what to which root is the
// caller's. Errors: ErrNotFound (machine), ErrInvalid (path, name),
// ErrExists (the machine already maps a folder to that root, or that
// folder, or one inside or above it: two mappings of one tree would
// sync the same files twice).
func (s *Service) CreateMapping(ctx context.Context, mm MachineMapping) (MachineMapping, error) {
	p, err := CleanMachinePath("path", mm.Path)
	if err != nil {
		return MachineMapping{}, err
	}
	mm.Path = p
	if len(mm.Name) > 255 || hasControl(mm.Name) {
		return MachineMapping{}, invalid("name", "longer than 255 bytes or has control characters")
	}
	if mm.RootID == 0 {
		return MachineMapping{}, invalid("root_id", "required")
	}
	id, err := s.db.NextID(ctx, seqMapping)
	if err != nil {
		return MachineMapping{}, err
	}
	mm.ID = id
	mm.Created = s.now().UTC()
	err = s.db.Update(ctx, func(tx kv.Txn) error {
		var m Machine
		if err := s.get(tx, key(pfxMachine, mm.MachineID), &m, notFoundf("machine %d", mm.MachineID)); err != nil {
			return err
		}
		// The machine's deletion reads it (see touch), and so does a
		// concurrent mapping of it, whose check of the others
		// below then meets this one.
		if err := touch(tx, key(pfxMachine, mm.MachineID)); err != nil {
			return err
		}
		existing, err := s.mappingsIn(tx, mm.MachineID)
		if err != nil {
			return err
		}
		for _, e := range existing {
			if e.RootID == mm.RootID {
				return errExistsf("machine %d already maps a folder to root %d (mapping %d)", mm.MachineID, mm.RootID, e.ID)
			}
			if WithinMachinePath(mm.Path, e.Path) || WithinMachinePath(e.Path, mm.Path) {
				return errExistsf("machine %d already maps %s (mapping %d), which holds or is inside %s", mm.MachineID, e.Path, e.ID, mm.Path)
			}
		}
		if err := s.put(tx, key(pfxMapping, mm.ID), &mm); err != nil {
			return err
		}
		if err := tx.Set(key(pfxMachineMapping, mm.MachineID, mm.ID), nil); err != nil {
			return err
		}
		return s.recordMachine(ctx, tx, ActMachineMappingCreated, m, mm.RootID, mm.Path)
	})
	return mm, err
}

func errExistsf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrExists}, args...)...)
}

// Mapping returns mapping id of machine machineID. Errors: ErrNotFound
// (also for another machine's mapping).
func (s *Service) Mapping(ctx context.Context, machineID, id uint64) (MachineMapping, error) {
	var mm MachineMapping
	err := s.db.View(ctx, func(tx kv.Txn) error {
		if err := s.get(tx, key(pfxMapping, id), &mm, notFoundf("mapping %d", id)); err != nil {
			return err
		}
		if mm.MachineID != machineID {
			return notFoundf("mapping %d", id)
		}
		return nil
	})
	return mm, err
}

// Mappings returns machine machineID's mappings in id order.
func (s *Service) Mappings(ctx context.Context, machineID uint64) ([]MachineMapping, error) {
	var out []MachineMapping
	err := s.db.View(ctx, func(tx kv.Txn) error {
		var err error
		out, err = s.mappingsIn(tx, machineID)
		return err
	})
	return out, err
}

func (s *Service) mappingsIn(tx kv.Txn, machineID uint64) ([]MachineMapping, error) {
	return listed[MachineMapping](s, tx, pfxMachineMapping, machineID, pfxMapping)
}

// DeleteMapping removes mapping id of machine machineID. The files on
// both sides stay. Errors: ErrNotFound.
func (s *Service) DeleteMapping(ctx context.Context, machineID, id uint64) error {
	return s.db.Update(ctx, func(tx kv.Txn) error {
		var mm MachineMapping
		if err := s.get(tx, key(pfxMapping, id), &mm, notFoundf("mapping %d", id)); err != nil {
			return err
		}
		if mm.MachineID != machineID {
			return notFoundf("mapping %d", id)
		}
		var m Machine
		if err := s.get(tx, key(pfxMachine, machineID), &m, notFoundf("machine %d", machineID)); err != nil {
			return err
		}
		for _, k := range [][]byte{key(pfxMapping, id), key(pfxMachineMapping, machineID, id)} {
			if err := tx.Delete(k); err != nil {
				return err
			}
		}
		return s.recordMachine(ctx, tx, ActMachineMappingDeleted, m, mm.RootID, mm.Path)
	})
}

// CreateBackup records that backup root b.RootID, made by the caller,
// backs up folder b.Path of machine b.MachineID. Errors: ErrNotFound
// (machine), ErrInvalid (path), ErrExists (the machine already backs up
// that folder, or one inside or above it).
func (s *Service) CreateBackup(ctx context.Context, b Backup) (Backup, error) {
	p, err := CleanMachinePath("path", b.Path)
	if err != nil {
		return Backup{}, err
	}
	b.Path = p
	if b.RootID == 0 {
		return Backup{}, invalid("root_id", "required")
	}
	b.Created = s.now().UTC()
	err = s.db.Update(ctx, func(tx kv.Txn) error {
		var m Machine
		if err := s.get(tx, key(pfxMachine, b.MachineID), &m, notFoundf("machine %d", b.MachineID)); err != nil {
			return err
		}
		// The machine's deletion reads it (see touch), and so does a
		// concurrent backup of it, whose check of the others
		// below then meets this one.
		if err := touch(tx, key(pfxMachine, b.MachineID)); err != nil {
			return err
		}
		existing, err := s.backupsIn(tx, b.MachineID)
		if err != nil {
			return err
		}
		for _, e := range existing {
			if WithinMachinePath(b.Path, e.Path) || WithinMachinePath(e.Path, b.Path) {
				return errExistsf("machine %d already backs up %s (backup %d), which holds or is inside %s", b.MachineID, e.Path, e.RootID, b.Path)
			}
		}
		if err := s.put(tx, key(pfxBackup, b.RootID), &b); err != nil {
			return err
		}
		if err := tx.Set(key(pfxMachineBackup, b.MachineID, b.RootID), nil); err != nil {
			return err
		}
		return s.recordMachine(ctx, tx, ActBackupCreated, m, b.RootID, b.Path)
	})
	return b, err
}

// BackupOf returns backup rootID of machine machineID. Errors:
// ErrNotFound (also for another machine's backup).
func (s *Service) BackupOf(ctx context.Context, machineID, rootID uint64) (Backup, error) {
	var b Backup
	err := s.db.View(ctx, func(tx kv.Txn) error {
		if err := s.get(tx, key(pfxBackup, rootID), &b, notFoundf("backup %d", rootID)); err != nil {
			return err
		}
		if b.MachineID != machineID {
			return notFoundf("backup %d", rootID)
		}
		return nil
	})
	return b, err
}

// Backups returns machine machineID's backups in root id order.
func (s *Service) Backups(ctx context.Context, machineID uint64) ([]Backup, error) {
	var out []Backup
	err := s.db.View(ctx, func(tx kv.Txn) error {
		var err error
		out, err = s.backupsIn(tx, machineID)
		return err
	})
	return out, err
}

func (s *Service) backupsIn(tx kv.Txn, machineID uint64) ([]Backup, error) {
	return listed[Backup](s, tx, pfxMachineBackup, machineID, pfxBackup)
}

// MarkRestored records that a restore of backup rootID of machine
// machineID was asked for, to target, and returns the backup. Errors:
// ErrNotFound.
func (s *Service) MarkRestored(ctx context.Context, machineID, rootID uint64, target string) (Backup, error) {
	var b Backup
	err := s.db.Update(ctx, func(tx kv.Txn) error {
		if err := s.get(tx, key(pfxBackup, rootID), &b, notFoundf("backup %d", rootID)); err != nil {
			return err
		}
		if b.MachineID != machineID {
			return notFoundf("backup %d", rootID)
		}
		var m Machine
		if err := s.get(tx, key(pfxMachine, machineID), &m, notFoundf("machine %d", machineID)); err != nil {
			return err
		}
		now := s.now().UTC()
		b.Restored = &now
		if err := s.put(tx, key(pfxBackup, rootID), &b); err != nil {
			return err
		}
		return s.recordMachine(ctx, tx, ActBackupRestored, m, rootID, target)
	})
	return b, err
}

// DeleteBackup ends backup rootID of machine machineID: the machine
// stops backing the folder up. The backup root itself is the caller's to
// delete (or keep). Errors: ErrNotFound.
func (s *Service) DeleteBackup(ctx context.Context, machineID, rootID uint64) error {
	return s.db.Update(ctx, func(tx kv.Txn) error {
		var b Backup
		if err := s.get(tx, key(pfxBackup, rootID), &b, notFoundf("backup %d", rootID)); err != nil {
			return err
		}
		if b.MachineID != machineID {
			return notFoundf("backup %d", rootID)
		}
		var m Machine
		if err := s.get(tx, key(pfxMachine, machineID), &m, notFoundf("machine %d", machineID)); err != nil {
			return err
		}
		for _, k := range [][]byte{key(pfxBackup, rootID), key(pfxMachineBackup, machineID, rootID)} {
			if err := tx.Delete(k); err != nil {
				return err
			}
		}
		return s.recordMachine(ctx, tx, ActBackupDeleted, m, rootID, b.Path)
	})
}
