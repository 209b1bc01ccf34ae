package chunk

// ReadAhead is readAhead, for tests that count prefetched chunks.
const ReadAhead = DefaultReadAhead

// SetBeforeSync makes d run f after it renames chunks into place and
// before it syncs their directories.
func SetBeforeSync(d *Disk, f func()) { d.beforeSync = f }

// NoSpace is noSpace, for the test that feeds it the kernel's errors.
var NoSpace = noSpace
