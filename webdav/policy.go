package webdav

import "berth/vfs"

// readOnly refuses a change by the session's person to file n that the
// organization policy's locked_extensions forbids (overwrite, move,
// delete; account.Policy.ExtensionReadOnly says when): the same rule as
// REST's. A collection is not refused: what it holds goes with it
// (docs/api.md says why).
func (s *session) readOnly(n vfs.Node) error {
	if n.Dir {
		return nil
	}
	return s.policy().ExtensionReadOnly(s.caller.Person, n.Name, n.Size)
}
