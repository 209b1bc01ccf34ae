package vfs

import (
	"fmt"
	"path"
	"strings"
	"unicode/utf8"
)

// MaxNameBytes is the longest name, in bytes of UTF-8, that a file or folder
// may have. 255 is what every common local file system allows, so anything
// stored here can be synced to a disk.
const MaxNameBytes = 255

// ValidateName reports whether name may name a file or folder. It is the one
// place the naming rules live; every operation that sets a name calls it.
func ValidateName(name string) error {
	switch {
	case name == "", name == ".", name == "..":
		return fmt.Errorf("%w: %q", ErrInvalidName, name)
	case len(name) > MaxNameBytes:
		return fmt.Errorf("%w: %d bytes, at most %d", ErrNameTooLong, len(name), MaxNameBytes)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidName)
	}
	for _, r := range name {
		if r == '/' || r == '\\' || !xmlChar(r) {
			return fmt.Errorf("%w: %q holds a forbidden character", ErrInvalidName, name)
		}
	}
	return nil
}

// xmlChar reports whether r may stand in a name. U+FFFE and U+FFFF are
// no characters, and XML 1.0, which every WebDAV answer is, cannot carry
// them: PROPFIND named such a file with U+FFFD, a name REST did not give
// and no request found. With them and the control characters out, every
// name is one XML can hold.
func xmlChar(r rune) bool {
	return r >= 0x20 && r != 0x7f && r != 0xfffe && r != 0xffff
}

// ValidateRootName reports whether name may name a root: not empty, valid
// UTF-8, and only characters a WebDAV answer can carry (as
// ValidateName, but "/" and "\" are allowed, which WebDAV's folder of
// the root shows as "_", and the length is not bounded: a backup's root
// is named after its machine and path). CreateRoot and RenameRoot took
// any name that was not empty, and the store's decoder refuses invalid
// UTF-8: an organization share or a backup named with a byte such as
// 0xFF was stored, and every listing of the organization's roots read
// it and failed, 500, until the record was edited by hand.
func ValidateRootName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty root name", ErrInvalidName)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: a root name must be valid UTF-8", ErrInvalidName)
	case strings.ContainsFunc(name, func(r rune) bool { return !xmlChar(r) }):
		return fmt.Errorf("%w: root name %q holds a forbidden character", ErrInvalidName, name)
	}
	return nil
}

// extension returns the lowercase extension of name with its leading dot,
// or "" when it has none.
func extension(name string) string {
	return strings.ToLower(path.Ext(name))
}

// excluded reports whether name ends in one of the extensions, compared
// without case; an entry may omit its leading dot and may span several
// (".tar.gz"). A name that is only the extension (".exe") is not refused.
// This is the organization policy's rule, applied once here for every
// front end. The name a Windows client writes the file under is checked
// too (windowsName): "setup.exe." and "setup.exe::$DATA" passed the rule
// and became setup.exe on every Windows machine that synced, mounted or
// unzipped them.
func excluded(name string, exts []string) bool {
	if w := windowsName(name); w != name && excludedAs(w, exts) {
		return true
	}
	return excludedAs(name, exts)
}

// windowsName is the name of the file Windows writes for name: up to a
// colon (NTFS names a stream of the file after it, "::$DATA" its
// contents), without the dots and spaces at its end, which Win32 drops.
func windowsName(name string) string {
	if i := strings.IndexByte(name, ':'); i >= 0 {
		name = name[:i]
	}
	return strings.TrimRight(name, ". ")
}

func excludedAs(name string, exts []string) bool {
	lname := strings.ToLower(name)
	for _, e := range exts {
		e = strings.ToLower(strings.TrimSpace(e))
		if e == "" {
			continue
		}
		if !strings.HasPrefix(e, ".") {
			e = "." + e
		}
		if strings.HasSuffix(lname, e) && len(lname) > len(e) {
			return true
		}
	}
	return false
}

// MaxDepth is how deep an item may be below its root's top folder (an item
// in the top folder is at depth 1). Every operation on an item walks the
// folders above it (its path, the locks above it), so depth is a cost on
// every request, and a tree 100,000 deep makes each of them slow. Windows'
// MAX_PATH allows some 130 levels and macOS's PATH_MAX 512; the WebDAV
// front end takes paths of at most 1,024 segments, root name included, so
// anything vfs stores stays reachable over WebDAV.
const MaxDepth = 1000
