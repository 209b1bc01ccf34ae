//go:build unix

package agent

import "syscall"

// setUmask sets the process's umask to m and returns the one before.
func setUmask(m int) int { return syscall.Umask(m) }
