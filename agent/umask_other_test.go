//go:build !unix

package agent

// setUmask does nothing where there is no umask; it returns 0.
func setUmask(int) int { return 0 }
