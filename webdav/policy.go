package webdav

import (
	"berth/vfs"
)

// readOnly refuses a change by the session's person to file n at t that
// the policy of t's root forbids by its locked_extensions (overwrite,
// move, delete; account.Policy.ExtensionReadOnly says when): the same
// rule, under the same policy, as REST's. A collection is not refused:
// what it holds goes with it (docs/api.md says why).
func (s *session) readOnly(t target, n vfs.Node) error {
	if n.Dir {
		return nil
	}
	return s.policyOf(t).ExtensionReadOnly(s.caller.Person, s.placeOf(t), n.Name, n.Size)
}

// targetAt is what dav path p names for the policy of writes there
// (policyOf, binds). A first segment that names no root has none: the
// caller's own answers for it, as for the list of roots.
func (s *session) targetAt(p string) target {
	t, err := s.resolve(p)
	if err != nil {
		return target{}
	}
	return t
}
