package rest

import (
	"context"
	"errors"
	"net/http"
	"path"

	"berth/vfs"
)

// The organization policy's locked_extensions over REST (the same rule
// as WebDAV's, in account.Policy.ExtensionReadOnly): a file with a locked
// extension may be created, and written while still empty, but once it
// has contents nobody the policy binds overwrites, renames, moves or
// deletes it. The administrators of the policy's organization and of
// those above it are not bound (account.Policy.Binds).

// extensionReadOnly refuses a change by the caller to file n that
// locked_extensions forbids; folders are not refused (what a folder
// holds goes with it: docs/api.md says why).
func extensionReadOnly(r *http.Request, a fsAccess, n vfs.Node) error {
	if n.Dir {
		return nil
	}
	return a.policy.ExtensionReadOnly(callerOf(r).Person, a.place, n.Name, n.Size)
}

// uploadOptions are the options of an upload of name into parent: when
// locked_extensions makes such a file read-only for the caller, an
// existing one with contents is refused before the body is read, and
// the write commits only if the file is still as it was found (absent,
// or empty at that revision), so two uploads cannot slip past the check
// together.
func (s *server) uploadOptions(ctx context.Context, r *http.Request, a fsAccess, parent uint64, name string) (vfs.WriteOptions, error) {
	opts := a.opts
	pe := callerOf(r).Person
	if !a.policy.Binds(pe, a.place) || !a.policy.ExtensionLocked(name) || vfs.ValidateName(name) != nil {
		return opts, nil // a bad name is vfs's to refuse, by its own code
	}
	old, found, err := s.uploadTarget(ctx, a, parent, name)
	switch {
	case err != nil:
		return opts, err
	case !found:
		opts.IfAbsent = true
		return opts, nil
	case old.Dir:
		return opts, nil // vfs answers name_conflict
	}
	if err := a.policy.ExtensionReadOnly(pe, a.place, old.Name, old.Size); err != nil {
		return opts, err
	}
	opts.IfRevision = old.RevisionID
	return opts, nil
}

// uploadConditions holds an upload of name into parent to r's If-Match,
// If-Unmodified-Since and If-None-Match, as a WebDAV PUT is held: they
// are evaluated against the file the upload replaces, or none when the
// name is free (conditions), and the write then commits only while that
// file is still at that revision, or the name still free
// (vfs.WriteOptions.IfRevision, IfAbsent), so a revision that lands
// while the body arrives makes it 412 too (vfs.ErrChanged). A folder of
// that name is left to vfs, which refuses it (name_conflict).
func (s *server) uploadConditions(r *http.Request, a fsAccess, parent uint64, name string, opts vfs.WriteOptions) (vfs.WriteOptions, error) {
	if vfs.ValidateName(name) != nil {
		return opts, nil // vfs refuses the name, by its own code
	}
	old, found, err := s.uploadTarget(r.Context(), a, parent, name)
	switch {
	case err != nil:
		return opts, err
	case !found:
		if err := conditions(r, vfs.Node{}, false); err != nil {
			return opts, err
		}
		opts.IfAbsent = true
		return opts, nil
	case old.Dir:
		return opts, nil
	}
	if err := conditions(r, old, true); err != nil {
		return opts, err
	}
	opts.IfRevision = old.RevisionID
	return opts, nil
}

// uploadTarget is what an upload of name into parent replaces: found is
// false when the name is free, and a folder of that name is found with
// Dir set, for vfs to refuse.
func (s *server) uploadTarget(ctx context.Context, a fsAccess, parent uint64, name string) (old vfs.Node, found bool, err error) {
	dir, err := s.fs.Stat(ctx, a.root.ID, parent)
	if err != nil {
		return vfs.Node{}, false, err
	}
	old, err = s.fs.Lookup(ctx, a.root.ID, path.Join(dir.Path, name))
	if errors.Is(err, vfs.ErrNotExist) {
		return vfs.Node{}, false, nil
	}
	return old, err == nil, err
}
