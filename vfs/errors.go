package vfs

import (
	"errors"

	"berth/vfs/chunk"
)

// Errors returned by FS methods, declared once here; front ends map them to
// their protocol (rest to the spec's codes, webdav to os.Err* values).
// Compare with errors.Is: methods wrap them with context.
var (
	// ErrNotExist: no such root, folder, file or revision in that root, or
	// the item is deleted where a live one is needed.
	ErrNotExist = errors.New("vfs: not found")
	// ErrNameConflict: a live sibling already has that name, or a move would
	// put a folder inside itself.
	ErrNameConflict = errors.New("vfs: name conflict")
	// ErrLocked: the item, or a folder above it, is locked by someone else
	// (for a delete, move or rename of a folder, or an item below it).
	ErrLocked = errors.New("vfs: resource locked")
	// ErrRootDeleted: the root was deleted earlier.
	ErrRootDeleted = errors.New("vfs: root deleted")
	// ErrInvalidName: the name is empty, ".", "..", or holds "/", "\", NUL,
	// control characters or invalid UTF-8.
	ErrInvalidName = errors.New("vfs: invalid name")
	// ErrNameTooLong: the name is longer than MaxNameBytes.
	ErrNameTooLong = errors.New("vfs: name too long")
	// ErrNotDir: a folder operation named a file.
	ErrNotDir = errors.New("vfs: not a folder")
	// ErrIsDir: a file operation named a folder.
	ErrIsDir = errors.New("vfs: is a folder")
	// ErrExtensionExcluded: the policy forbids files with that extension.
	ErrExtensionExcluded = errors.New("vfs: file extension excluded by policy")
	// ErrFileTooLarge: the body is larger than the policy's maximum file size.
	ErrFileTooLarge = errors.New("vfs: file larger than the policy allows")
	// ErrQuotaExceeded: storing the body would exceed the root's space quota.
	ErrQuotaExceeded = errors.New("vfs: space quota exceeded")
	// ErrNoSuchLock: an unlock or refresh named a lock token the item does not hold.
	ErrNoSuchLock = errors.New("vfs: no such lock")
	// ErrChanged: WriteOptions.IfRevision or IfAbsent did not hold when
	// the write came to commit; nothing was stored.
	ErrChanged = errors.New("vfs: changed since the condition was checked")
	// ErrBusy: the operation lost a race it cannot wait out (a write
	// conflict that outlasted the retries, the store closing under it,
	// a zip while its requester's zips hold their share of ZipBudget);
	// nothing was stored, and the same request succeeds when tried
	// again.
	ErrBusy = errors.New("vfs: busy, try again")
	// ErrRootItem: the operation cannot apply to a root's top folder (rename,
	// move or delete it through the root instead).
	ErrRootItem = errors.New("vfs: operation not allowed on the root folder")
	// ErrNoSpace: the storage is full, or down to the reserve it keeps
	// (chunk.DiskOptions.Reserve); nothing was stored. It is the chunk
	// store's value, so one comparison covers a refusal by either layer.
	ErrNoSpace = chunk.ErrNoSpace
	// ErrMetadataLimit: the change would take an item's metadata past one
	// of its bounds (MaxPropNameBytes, MaxProps, MaxPropsBytes,
	// MaxLockOwnerBytes, MaxLocks); nothing was stored. The bounds keep
	// one client from growing what every listing of the item reads.
	ErrMetadataLimit = errors.New("vfs: item metadata over its limit")
	// ErrTooDeep: the item would be more than MaxDepth folders below its
	// root's top folder.
	ErrTooDeep = errors.New("vfs: folders nested too deep")
	// ErrUploadOffset: an append to a staged upload named an offset
	// other than the upload's (another request appended meanwhile, or
	// the client lost track), or Finish found it incomplete; nothing
	// was stored.
	ErrUploadOffset = errors.New("vfs: staged upload offset mismatch")
	// ErrChecksumMismatch: the bytes of an append to a staged upload do
	// not match the checksum sent with them; nothing was stored.
	ErrChecksumMismatch = errors.New("vfs: checksum mismatch")
	// ErrZipTooLarge: the folder has more items than one zip lists
	// (ZipMaxEntries), items whose layout alone passes half of ZipBudget, or a
	// path longer than a zip entry's name holds (65,535 bytes); its
	// subfolders can be zipped one by one.
	ErrZipTooLarge = errors.New("vfs: folder too large for one zip")
	// ErrTooManyStaged: the owner already has StageOptions.MaxPerOwner
	// staged uploads in progress; nothing was staged. Each holds a record
	// that every listing of the uploads, the quota's room-making and the
	// gauges read, so one owner's uploads left unsent must not grow them
	// for everyone.
	ErrTooManyStaged = errors.New("vfs: too many staged uploads in progress")
)
