package activity

// Type is one kind of activity (spec 2.16 activity_type): a fixed table,
// the same on every server, so its ids can be stored in records and
// named by clients.
type Type struct {
	ID uint64
	// Name is the change's name where berth records it: an account Act
	// name ("person_created") or a vfs operation ("write").
	Name string
	// Activity describes the kind for people.
	Activity string
	// MachineScope: a machine (a sync client) can make it; UserScope: a
	// person or guest can; SystemScope: berth itself or an
	// administrator's tools can.
	MachineScope bool
	UserScope    bool
	SystemScope  bool
}

// Note is the type of the records that clients add through
// activity/create: any other type is berth's own to record.
const Note = "note"

// table is the table. Ids are stable: a new kind takes the next free id
// and none is ever renumbered or reused, since stored records name them.
// A function, not a variable, so nothing can change it at run time.
func table() []Type {
	return []Type{
		// Files (vfs operations).
		{1, "create_root", "A root was created", false, true, true},
		{2, "delete_root", "A root was deleted", false, true, true},
		{3, "mkdir", "A folder was created", true, true, false},
		{4, "write", "A file was uploaded, or a new revision of it", true, true, false},
		{5, "rename", "A file or folder was renamed", true, true, false},
		{6, "move", "A file or folder was moved", true, true, false},
		{7, "copy", "A file or folder was copied", true, true, false},
		{8, "delete", "A file or folder was deleted", true, true, false},
		{9, "purge", "A deleted file or folder was purged for good", true, true, true},
		{10, "lock", "A file or folder was locked", true, true, false},
		{11, "unlock", "A file or folder was unlocked", true, true, false},

		// Organizations and policies.
		{20, "organization_created", "An organization was created", false, true, true},
		{21, "organization_updated", "An organization was updated", false, true, true},
		{22, "organization_disabled", "An organization was disabled", false, true, true},
		{23, "organization_enabled", "An organization was enabled", false, true, true},
		{24, "organization_deleted", "An organization was deleted", false, true, true},
		{25, "policy_updated", "An organization's policy was updated", false, true, true},

		// Persons and guests.
		{30, "person_created", "A person was created", false, true, true},
		{31, "person_updated", "A person was updated", false, true, true},
		{32, "person_deleted", "A person was deleted", false, true, true},
		{33, "password_changed", "A person changed their password", false, true, false},
		{34, "password_reset", "A person's password was reset", false, true, true},
		{35, "person_unlocked", "A locked account was unlocked", false, true, true},
		{36, "guest_created", "A guest was created", false, true, true},
		{37, "guest_updated", "A guest was updated", false, true, true},
		{38, "guest_deleted", "A guest was deleted", false, true, true},
		{39, "guest_converted", "A guest was converted to a person", false, true, true},

		// Groups.
		{40, "group_created", "A group was created", false, true, true},
		{41, "group_updated", "A group was updated", false, true, true},
		{42, "group_deleted", "A group was deleted", false, true, true},
		{43, "group_members_updated", "A group's members were updated", false, true, true},

		// Roots of accounts.
		{50, "root_created", "A root was created for an account", false, true, true},

		// Sign-in.
		{60, "login", "A person signed in", true, true, false},
		{61, "login_failed", "A sign-in failed", true, true, true},
		{62, "account_locked", "An account was locked after failed sign-ins", true, true, true},

		// Sharing.
		{70, "sharelink_created", "A share link was created", false, true, false},
		{71, "sharelink_updated", "A share link or its subscribers were changed", false, true, false},
		{72, "sharelink_deleted", "A share link was deleted", false, true, false},
		{73, "share_subscribers_updated", "An organization share's subscribers were changed", false, true, true},

		// Directory servers (auth sources).
		{80, "auth_source_created", "A directory server was added", false, true, true},
		{81, "auth_source_updated", "A directory server's settings were changed", false, true, true},
		{82, "auth_source_deleted", "A directory server was removed", false, true, true},
		{83, "auth_source_imported", "Persons were imported from a directory server", false, true, true},
		// Device passwords and machines.
		{90, "device_password_created", "A device password was created", false, true, false},
		{91, "device_password_revoked", "A device password was revoked", false, true, true},
		{92, "machine_deleted", "A machine was deleted", false, true, true},
		{93, "machine_server_changed", "A machine's file server was turned on or off", true, true, false},
		{94, "machine_mapping_created", "A folder of a machine was mapped to a root", true, true, false},
		{95, "machine_mapping_deleted", "A folder mapping of a machine was removed", true, true, false},
		{96, "backup_created", "A backup of a machine's folder was set up", true, true, false},
		{97, "backup_restored", "A backup was restored to a machine", true, true, false},
		{98, "backup_deleted", "A backup of a machine's folder was ended", true, true, false},

		// Added by clients.
		{100, Note, "A note added through activity/create", true, true, true},
	}
}

// Types returns the table, ordered by id. It returns a new slice each time.
func Types() []Type { return table() }

// TypeNamed returns the type of the change named name.
func TypeNamed(name string) (Type, bool) {
	for _, t := range table() {
		if t.Name == name {
			return t, true
		}
	}
	return Type{}, false
}

// TypeByID returns the type with id.
func TypeByID(id uint64) (Type, bool) {
	for _, t := range table() {
		if t.ID == id {
			return t, true
		}
	}
	return Type{}, false
}
