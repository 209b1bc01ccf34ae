package berthtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"berth/account"
	"berth/kv"
	"berth/share"
	"berth/vfs"
	"berth/vfs/chunk"
)

// domainPackages are the directories, relative to the module root, of the
// domain packages (and share, whose access errors the front ends map too)
// whose exported errors every front end maps: only the directories
// themselves, not what is below them (kv/badger is an engine, whose errors
// kv turns into its own).
func domainPackages() []string { return []string{"vfs", "vfs/chunk", "kv", "account", "share"} }

// DomainErrors returns every exported error value of the domain packages by
// qualified name ("vfs.ErrNotExist", "chunk.ErrNoSpace"). It is the one
// place that lists them by hand; DomainErrorValues checks it against the
// source, so a new error fails the front ends' table tests until it is
// listed here and mapped there.
func DomainErrors() map[string]error {
	return map[string]error{
		"vfs.ErrNotExist":          vfs.ErrNotExist,
		"vfs.ErrNameConflict":      vfs.ErrNameConflict,
		"vfs.ErrLocked":            vfs.ErrLocked,
		"vfs.ErrRootDeleted":       vfs.ErrRootDeleted,
		"vfs.ErrInvalidName":       vfs.ErrInvalidName,
		"vfs.ErrNameTooLong":       vfs.ErrNameTooLong,
		"vfs.ErrNotDir":            vfs.ErrNotDir,
		"vfs.ErrIsDir":             vfs.ErrIsDir,
		"vfs.ErrExtensionExcluded": vfs.ErrExtensionExcluded,
		"vfs.ErrFileTooLarge":      vfs.ErrFileTooLarge,
		"vfs.ErrQuotaExceeded":     vfs.ErrQuotaExceeded,
		"vfs.ErrNoSuchLock":        vfs.ErrNoSuchLock,
		"vfs.ErrChanged":           vfs.ErrChanged,
		"vfs.ErrBusy":              vfs.ErrBusy,
		"vfs.ErrRootItem":          vfs.ErrRootItem,
		"vfs.ErrNoSpace":           vfs.ErrNoSpace,
		"vfs.ErrMetadataLimit":     vfs.ErrMetadataLimit,
		"vfs.ErrTooDeep":           vfs.ErrTooDeep,
		"vfs.ErrUploadOffset":      vfs.ErrUploadOffset,
		"vfs.ErrChecksumMismatch":  vfs.ErrChecksumMismatch,
		"vfs.ErrZipTooLarge":       vfs.ErrZipTooLarge,
		"vfs.ErrTooManyStaged":     vfs.ErrTooManyStaged,
		"vfs.ErrOtherChunkStore":   vfs.ErrOtherChunkStore,

		"chunk.ErrNotFound":  chunk.ErrNotFound,
		"chunk.ErrCorrupt":   chunk.ErrCorrupt,
		"chunk.ErrInvalidID": chunk.ErrInvalidID,
		"chunk.ErrTooLarge":  chunk.ErrTooLarge,
		"chunk.ErrNoSpace":   chunk.ErrNoSpace,

		"kv.ErrNotFound":   kv.ErrNotFound,
		"kv.ErrConflict":   kv.ErrConflict,
		"kv.ErrTxnTooBig":  kv.ErrTxnTooBig,
		"kv.ErrClosed":     kv.ErrClosed,
		"kv.ErrLeaseLost":  kv.ErrLeaseLost,
		"kv.ErrReadOnly":   kv.ErrReadOnly,
		"kv.ErrInUse":      kv.ErrInUse,
		"kv.ErrNotDurable": kv.ErrNotDurable,
		"kv.ErrDamaged":    kv.ErrDamaged,
		"kv.ErrStop":       kv.ErrStop,

		"account.ErrNotFound":           account.ErrNotFound,
		"account.ErrExists":             account.ErrExists,
		"account.ErrInvalid":            account.ErrInvalid,
		"account.ErrInvalidCredentials": account.ErrInvalidCredentials,
		"account.ErrAccountLocked":      account.ErrAccountLocked,
		"account.ErrInvalidToken":       account.ErrInvalidToken,
		"account.ErrInactive":           account.ErrInactive,
		"account.ErrUserLimitExceeded":  account.ErrUserLimitExceeded,
		"account.ErrOrgLimitExceeded":   account.ErrOrgLimitExceeded,
		"account.ErrGroupCycle":         account.ErrGroupCycle,
		"account.ErrExtensionLocked":    account.ErrExtensionLocked,
		"account.ErrPasswordExpired":    account.ErrPasswordExpired,
		// Two-step verification's device passwords (identity issue).
		"account.ErrDevicePasswordRequired": account.ErrDevicePasswordRequired,

		"account.ErrDirectoryDisabled": account.ErrDirectoryDisabled,
		"account.ErrDirectory":         account.ErrDirectory,
		"account.ErrMissingTOTP":       account.ErrMissingTOTP,
		"account.ErrInvalidTOTP":       account.ErrInvalidTOTP,
		"account.ErrTwoStepRequired":   account.ErrTwoStepRequired,
		"account.ErrCodeNotSent":       account.ErrCodeNotSent,
		"account.ErrCodeSentRecently":  account.ErrCodeSentRecently,
		"account.ErrTooManyAttempts":   account.ErrTooManyAttempts,
		"account.ErrBusy":              account.ErrBusy,

		"share.ErrNoRoot":            share.ErrNoRoot,
		"share.ErrForbidden":         share.ErrForbidden,
		"share.ErrNotFound":          share.ErrNotFound,
		"share.ErrInvitationExpired": share.ErrInvitationExpired,

		"share.ErrLinkExpired":   share.ErrLinkExpired,
		"share.ErrDownloadLimit": share.ErrDownloadLimit,
		"share.ErrLoginRequired": share.ErrLoginRequired,
		"share.ErrInvalidDate":   share.ErrInvalidDate,
		"share.ErrNoLinks":       share.ErrNoLinks,
	}
}

// DomainErrorNames parses the non-test Go files of the domain packages and
// returns the qualified name of every exported package-level variable
// whose name starts with "Err", sorted.
func DomainErrorNames(t testing.TB) []string {
	t.Helper()
	root := ModuleRoot(t)
	var names []string
	for _, dir := range domainPackages() {
		pkg, vars := VarNames(t, filepath.Join(root, dir), "Err")
		for _, v := range vars {
			names = append(names, pkg+"."+v)
		}
	}
	slices.Sort(names)
	if len(names) == 0 {
		t.Fatal("berthtest: found no exported Err* variables; is the module layout as domainPackages says?")
	}
	return names
}

// VarNames parses the non-test Go files in dir and returns their package's
// name and the names of its package-level variables that start with
// prefix, sorted. The error-table tests read the error values a package
// declares from its source, so that a new one cannot slip past its table
// (a front end reads its own unexported err* values this way too).
func VarNames(t testing.TB, dir, prefix string) (pkg string, names []string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("berthtest: reading %s: %v", dir, err)
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("berthtest: parsing %s/%s: %v", dir, n, err)
		}
		pkg = f.Name.Name
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, s := range g.Specs {
				for _, id := range s.(*ast.ValueSpec).Names {
					if strings.HasPrefix(id.Name, prefix) {
						names = append(names, id.Name)
					}
				}
			}
		}
	}
	slices.Sort(names)
	return pkg, names
}

// DomainErrorValues returns every exported error of the domain packages, by
// qualified name, as the source declares them (DomainErrorNames) and
// DomainErrors gives their values. A declared name DomainErrors lacks
// fails t: list it there, and map it in every front end's table.
func DomainErrorValues(t testing.TB) map[string]error {
	t.Helper()
	all := DomainErrors()
	out := map[string]error{}
	for _, name := range DomainErrorNames(t) {
		v, ok := all[name]
		if !ok || v == nil {
			t.Errorf("%s is declared but missing from berthtest.DomainErrors: add it there and a row for it to every front end's error table", name)
			continue
		}
		out[name] = v
	}
	for name := range all {
		if _, ok := out[name]; !ok {
			t.Errorf("berthtest.DomainErrors lists %s, which no domain package declares any more", name)
		}
	}
	return out
}

// ForEachDomainError runs check as a subtest of t, named by the error's
// qualified name, for every exported error of the domain packages
// (DomainErrorValues). It is the one set-up of every front end's
// table-coverage test, so each checks its own table against one list.
func ForEachDomainError(t *testing.T, check func(t *testing.T, name string, err error)) {
	t.Helper()
	for name, err := range DomainErrorValues(t) {
		t.Run(name, func(t *testing.T) { check(t, name, err) })
	}
}
