package agent

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/fsnotify/fsnotify"
)

// tempPrefix starts the names of the agent's own temporary files (a
// download before it is renamed into place). They are never synced and
// are counted in excl_files while they exist; a mapping's first scan
// removes those a cut download left.
const tempPrefix = ".berth-part-"

// markerName is a file the agent puts in a mapped folder when it first
// syncs it. A folder that was synced and lacks it is taken as missing
// (an unmounted drive leaves an empty folder), never as everything
// deleted. It is not synced, nor counted as excluded.
const markerName = ".berth-mapping"

const markerText = "This folder is kept in step with a berth root by berth agent. Deleting this file pauses the sync.\n"

// localItem is a local file or folder as the last scan or event saw it.
type localItem struct {
	Dir   bool
	Size  int64
	Mtime int64
}

// localView is the mapped folder's files by relative path, kept current
// by fsnotify events so that a change costs a stat of what changed, and
// by a full walk at start and at each safety rescan.
type localView struct {
	root     string
	items    map[string]localItem
	excluded map[string]bool // relative paths never synced: the agent's temporary files, links, devices
}

func newLocalView(root string) *localView {
	return &localView{root: root, items: map[string]localItem{}, excluded: map[string]bool{}}
}

// abs is rel's path on this machine.
func (v *localView) abs(rel string) string {
	if rel == "" {
		return v.root
	}
	return filepath.Join(v.root, filepath.FromSlash(rel))
}

// rel is abs's relative path, and whether it lies below the root.
func (v *localView) rel(abs string) (string, bool) {
	r, err := filepath.Rel(v.root, abs)
	if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return "", false
	}
	if r == "." {
		return "", true
	}
	return filepath.ToSlash(r), true
}

// skipName is a name the agent never syncs whatever it is.
func skipName(name string) bool { return strings.HasPrefix(name, tempPrefix) }

// rescan walks the whole folder again (the safety rescan), adding a
// watch on every folder when w is not nil.
func (v *localView) rescan(w *fsnotify.Watcher) error {
	v.items = map[string]localItem{}
	v.excluded = map[string]bool{}
	return v.walk("", w)
}

// removeLeftovers removes the agent's temporary files that the first
// scan found: a download cut by a kill or a power loss leaves one, and
// nothing else would ever remove it from the user's folder. Only the
// first scan may do it, before this run starts a download of its own.
func (v *localView) removeLeftovers() {
	for rel := range v.excluded {
		p := v.abs(rel)
		if !skipName(path.Base(rel)) {
			continue
		}
		if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
			continue // a folder or link of the user's with the name is theirs
		}
		if err := os.Remove(p); err == nil || errors.Is(err, fs.ErrNotExist) {
			delete(v.excluded, rel)
		}
	}
}

// walk adds everything below rel (a folder) to the view.
func (v *localView) walk(rel string, w *fsnotify.Watcher) error {
	base := v.abs(rel)
	return filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // gone while walking: its event follows
			}
			if p == base {
				return err
			}
			return nil
		}
		r, ok := v.rel(p)
		if !ok {
			return nil
		}
		if r == "" {
			if w != nil {
				w.Add(p)
			}
			return nil
		}
		if r == markerName {
			return nil
		}
		if skipName(d.Name()) || !(d.Type().IsRegular() || d.IsDir()) {
			v.excluded[r] = true
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			v.items[r] = localItem{Dir: true}
			if w != nil {
				w.Add(p)
			}
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		v.items[r] = localItem{Size: fi.Size(), Mtime: fi.ModTime().UnixNano()}
		return nil
	})
}

// refresh brings rel up to date after an event: a stat of rel, and a walk
// below it when deep (a folder created or moved in).
func (v *localView) refresh(rel string, deep bool, w *fsnotify.Watcher) {
	if rel == "" || rel == markerName {
		return
	}
	v.drop(rel, deep)
	fi, err := os.Lstat(v.abs(rel))
	if err != nil {
		v.drop(rel, true)
		return
	}
	if skipName(path.Base(rel)) || !(fi.Mode().IsRegular() || fi.IsDir()) {
		v.excluded[rel] = true
		return
	}
	if fi.IsDir() {
		v.items[rel] = localItem{Dir: true}
		if deep {
			v.walk(rel, w)
		}
		return
	}
	v.items[rel] = localItem{Size: fi.Size(), Mtime: fi.ModTime().UnixNano()}
}

// drop forgets rel, and everything below it when deep.
func (v *localView) drop(rel string, deep bool) {
	delete(v.items, rel)
	delete(v.excluded, rel)
	if !deep {
		return
	}
	pre := rel + "/"
	for k := range v.items {
		if strings.HasPrefix(k, pre) {
			delete(v.items, k)
		}
	}
	for k := range v.excluded {
		if strings.HasPrefix(k, pre) {
			delete(v.excluded, k)
		}
	}
}

// stat is rel's current state on disk.
func (v *localView) stat(rel string) (localItem, bool) {
	fi, err := os.Lstat(v.abs(rel))
	if err != nil || !(fi.Mode().IsRegular() || fi.IsDir()) {
		return localItem{}, false
	}
	if fi.IsDir() {
		return localItem{Dir: true}, true
	}
	return localItem{Size: fi.Size(), Mtime: fi.ModTime().UnixNano()}, true
}
