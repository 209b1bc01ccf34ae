package web

import "testing"

// SetSmallFolder makes folders of more than n items list as large ones
// for the rest of t.
func SetSmallFolder(t testing.TB, n int64) {
	old := smallFolder
	smallFolder = n
	t.Cleanup(func() { smallFolder = old })
}
