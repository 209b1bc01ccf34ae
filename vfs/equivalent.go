package vfs

import (
	"context"
	"errors"
	"strings"

	"golang.org/x/text/unicode/norm"

	"berth/kv"
)

// Equivalent is path p of root with each name that names nothing but is
// canonically equivalent (Unicode, NFC) to a name in its folder replaced
// by that name, as far as the names lead; p itself when they all exist
// as they are, or when nothing equivalent does. Names are stored and
// compared byte for byte (docs/api.md, Unicode normalization), and an
// exact name always wins; this is the lookup of a client that does not
// send the bytes a listing gave it. macOS's WebDAV client sends every
// path decomposed (NFD), whatever the server listed, so a "café.txt"
// written precomposed (NFC) by Windows, Linux or the API answered Finder
// 404, and its save wrote a second "café.txt" beside it. APFS looks
// names up the same way: bytes kept, lookups insensitive to
// normalization. A path of ASCII alone is returned at once, unread.
func (fs *FS) Equivalent(ctx context.Context, root uint64, p string) string {
	if isASCII(p) {
		return p
	}
	segs, err := splitPath(p)
	if err != nil || len(segs) == 0 {
		return p
	}
	changed := false
	err = fs.db.View(ctx, func(tx kv.Txn) error {
		if _, err := loadRoot(tx, root); err != nil {
			return err
		}
		var rec nodeRec
		if err := get(tx, topKey(root), &rec, ErrNotExist); err != nil {
			return err
		}
		for i, s := range segs {
			if !rec.Dir {
				return nil
			}
			var c nodeRec
			err := get(tx, childKey(rec.ID, s), &c, ErrNotExist)
			if errors.Is(err, ErrNotExist) {
				if c, err = equivalentChild(tx, rec.ID, s); err != nil || c.ID == 0 {
					return err
				}
				segs[i], changed = c.Name, true
			} else if err != nil {
				return err
			}
			rec = c
		}
		return nil
	})
	if err != nil || !changed {
		return p
	}
	q := "/" + strings.Join(segs, "/")
	if strings.HasSuffix(p, "/") {
		q += "/"
	}
	return q
}

// equivalentChild is the live child of folder whose name is the NFC or
// the NFD form of name (the NFC one first), or none (ID 0). Those are
// the forms clients send: macOS's decomposed, everyone else's
// precomposed. Two point reads, where a scan of the names sharing the
// name's ASCII beginning read a whole folder of a million files for
// every new name that begins with an accented letter, or with a prefix
// every name there shares ("IMG_").
func equivalentChild(tx kv.Txn, folder uint64, name string) (nodeRec, error) {
	if isASCII(name) {
		return nodeRec{}, nil
	}
	for _, f := range [...]norm.Form{norm.NFC, norm.NFD} {
		n := f.String(name)
		if n == name {
			continue
		}
		var rec nodeRec
		err := get(tx, childKey(folder, n), &rec, ErrNotExist)
		if err == nil {
			return rec, nil
		}
		if !errors.Is(err, ErrNotExist) {
			return nodeRec{}, err
		}
	}
	return nodeRec{}, nil
}

// EquivalentNames reports whether names a and b are canonically
// equivalent: the same bytes, or the same in NFC.
func EquivalentNames(a, b string) bool {
	return a == b || !isASCII(a) && !isASCII(b) && norm.NFC.String(a) == norm.NFC.String(b)
}

// isASCII reports whether s holds ASCII alone, which no normalization
// changes.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
