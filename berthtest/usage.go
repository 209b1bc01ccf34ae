package berthtest

import "berth/vfs"

// Trashed is u as its tallies count a deleted root's usage until its
// purge: all of it in the trash (vfs's usageRec.trashed), for the tests
// that keep a ledger of the tallies beside the file system's.
func Trashed(u vfs.Usage) vfs.Usage {
	return vfs.Usage{
		DelFileCount:     u.DelFileCount + u.FileCount,
		DelRevisionCount: u.DelRevisionCount + u.RevisionCount + u.FileCount,
		DeletedSize:      u.DeletedSize + u.HeadSize + u.RevisionSize,
		PhysicalSize:     u.PhysicalSize,
	}
}
