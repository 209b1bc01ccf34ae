package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// registerLs adds the ls command: the names in a folder of the machine,
// for POST /api/2/machine/<id>/ls.
func registerLs(a *Agent) { a.Handle("ls", a.ls) }

// lsResult is the ls command's answer. A folder's name ends in "/";
// anything else (a file, a symbolic link, a device) is its bare name.
type lsResult struct {
	Names []string `json:"names"`
}

// ls lists a folder, but only within the folders the machine's set-up
// maps or backs up (Setup.Folders). The server checks the same before
// it asks; the agent checks again on its own disk, where symbolic links
// live: the path is cleaned, resolved through every link, and refused
// when what it resolves to lies outside the resolved allowed folders, so
// a link inside a backed-up folder cannot open the rest of the disk.
func (a *Agent) ls(ctx context.Context, raw json.RawMessage) (any, error) {
	var args struct {
		Path string `json:"path"`
	}
	if err := json.Unmarshal(raw, &args); err != nil || args.Path == "" {
		return nil, &APIError{Code: "invalid_request", Description: "ls takes a path"}
	}
	p := localPath(args.Path)
	if !filepath.IsAbs(p) || strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return nil, &APIError{Code: "invalid_request", Description: "the path must be absolute, without control characters"}
	}
	p = filepath.Clean(p)
	s, known := a.Setup()
	if !known {
		if err := a.readSetup(ctx); err != nil {
			return nil, &APIError{Code: "temporarily_unavailable", Description: "the machine has not read its set-up yet: " + err.Error()}
		}
		s, _ = a.Setup()
	}
	folders := s.Folders()
	if !withinAnyLocal(p, folders) {
		return nil, errLsForbidden
	}
	real, err := filepath.EvalSymlinks(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &APIError{Code: "not_found", Description: "no such folder on the machine"}
	}
	if errors.Is(err, fs.ErrPermission) {
		return nil, &APIError{Code: "forbidden", Description: "the agent may not read this folder"}
	}
	if err != nil {
		return nil, err
	}
	var resolved []string
	for _, f := range folders {
		if r, err := filepath.EvalSymlinks(filepath.Clean(f)); err == nil {
			resolved = append(resolved, r)
		}
	}
	if !withinAnyLocal(real, resolved) {
		return nil, errLsForbidden
	}
	ents, err := os.ReadDir(real)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, &APIError{Code: "not_found", Description: "no such folder on the machine"}
	case errors.Is(err, fs.ErrPermission):
		return nil, &APIError{Code: "forbidden", Description: "the agent may not read this folder"}
	case err != nil:
		if fi, serr := os.Stat(real); serr == nil && !fi.IsDir() {
			return nil, &APIError{Code: "invalid_request", Description: "the path is a file, not a folder"}
		}
		return nil, err
	}
	out := lsResult{Names: make([]string, 0, len(ents))}
	// os.ReadDir sorts by name.
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() {
			n += "/"
		}
		out.Names = append(out.Names, n)
	}
	return out, nil
}

var errLsForbidden = &APIError{Code: "forbidden", Description: "only folders the machine maps or backs up, and what is below them, may be listed"}

// withinAnyLocal reports whether the clean path p is one of dirs or
// below one.
func withinAnyLocal(p string, dirs []string) bool {
	for _, d := range dirs {
		rel, err := filepath.Rel(filepath.Clean(d), p)
		if err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel) {
			return true
		}
	}
	return false
}
