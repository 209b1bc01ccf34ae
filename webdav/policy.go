package webdav

import (
	"berth/account"
	"berth/vfs"
)

// readOnly refuses a change by the session's person to file n of root
// that the root's policy's locked_extensions forbids (overwrite, move,
// delete; account.Policy.ExtensionReadOnly says when): the same rule,
// under the same policy, as REST's. A collection is not refused: what it
// holds goes with it (docs/api.md says why).
func (s *session) readOnly(root uint64, n vfs.Node) error {
	if n.Dir {
		return nil
	}
	return s.policyFor(root).ExtensionReadOnly(s.caller.Person, n.Name, n.Size)
}

// policyAt is the policy of writes at dav path p: its root's
// (policyFor). The list of roots, and a first segment that names no
// root, have none: the caller's own answers for them, as it did before
// the roots had their own.
func (s *session) policyAt(p string) *account.Policy {
	if t, err := s.resolve(p); err == nil && !t.top() {
		return s.policyFor(t.m.root.ID)
	}
	return &s.caller.Organization.Policy
}
