package daemon

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"berth/account"
	"berth/atomicfile"
	"berth/config"
	"berth/vfs"
)

// initialPasswordFile is the file in the data directory that keeps a
// generated first password for the operator.
const initialPasswordFile = "initial-admin-password"

// firstRun creates the first organization and its administrator, with a
// sync root, when the store has no organization yet. A generated password
// is printed once to out and written to a 0600 file in dataDir.
func firstRun(ctx context.Context, cfg config.Config, files *vfs.FS, accounts *account.Service, log *slog.Logger, out io.Writer) error {
	has, err := accounts.HasOrganizations(ctx)
	if err != nil {
		return fmt.Errorf("first run: %w", err)
	}
	if has {
		return adminTallies(ctx, cfg, files, accounts)
	}

	password, generated := cfg.Admin.Password, false
	path := filepath.Join(cfg.Data, initialPasswordFile)
	if password != "" {
		// A file here is from a first start that generated a password
		// and was interrupted before the administrator existed: nobody
		// has that password.
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("first run: removing the stale %s: %w", path, err)
		}
	} else {
		// 26 base32 characters, 128 bits.
		password, generated = rand.Text(), true
		// Written before any account exists, so the password is never
		// lost to a crash between the two.
		if err := atomicfile.WriteFile(path, []byte(password+"\n"), 0o600); err != nil {
			return fmt.Errorf("first run: writing %s: %w", path, err)
		}
	}
	email := cfg.Admin.Email
	if email == "" {
		email = cfg.Admin.Login + "@localhost"
	}

	// The root first: it is refused on a disk down to its reserve, and
	// then nothing else is stored. The organization and its administrator
	// are one transaction, so an interrupted first start leaves neither
	// (only, at worst, an empty root) and the next start runs it again;
	// an organization without an administrator would look set up to every
	// later start, with nobody to log in.
	root, err := files.CreateRoot(ctx, cfg.Admin.Login, vfs.RootSync)
	if err != nil {
		return fmt.Errorf("first run: creating the administrator's sync root: %w", err)
	}
	org, person, err := accounts.Bootstrap(ctx, account.OrganizationInput{Name: cfg.Organization.Name}, account.PersonInput{
		Username:  cfg.Admin.Login,
		Email:     email,
		FirstName: "Administrator",
		Password:  password,
		Admin:     true,
		RootID:    root.ID,
	})
	if err != nil {
		return fmt.Errorf("first run: creating organization %q and administrator %q: %w", cfg.Organization.Name, cfg.Admin.Login, err)
	}
	if err := adminTallies(ctx, cfg, files, accounts); err != nil {
		return fmt.Errorf("first run: counting the administrator's root: %w", err)
	}
	log.Info("first run: created the organization and its administrator",
		"organization", org.Name, "organization_id", org.ID, "login", person.Username, "root_id", root.ID)

	if generated {
		fmt.Fprintf(out, "\nberth: first start. Administrator login: %s\nberth: password: %s\nberth: (also in %s; this is the only time it is printed)\n\n",
			person.Username, password, filepath.Join(cfg.Data, initialPasswordFile))
	} else {
		fmt.Fprintf(out, "\nberth: first start. Administrator login: %s (password from admin.password)\n\n", person.Username)
	}
	return nil
}

// adminTallies counts the first run's root into the tallies of its
// administrator and organization (account.RootTallies), which a root
// created before them could not name. It runs on every start, so that a
// first run cut short between Bootstrap and this still ends counted, and
// so does the root of a data directory made before the ledger (the first
// run's was its only root: no other person could be added then); a root
// that has its tallies is left as it is.
func adminTallies(ctx context.Context, cfg config.Config, files *vfs.FS, accounts *account.Service) error {
	p, err := accounts.PersonByLogin(ctx, cfg.Admin.Login)
	if errors.Is(err, account.ErrNotFound) || (err == nil && p.RootID == 0) {
		return nil
	}
	if err != nil {
		return err
	}
	tallies, err := accounts.RootTallies(ctx, p, string(vfs.RootSync))
	if err != nil {
		return err
	}
	err = files.SetRootTallies(ctx, p.RootID, vfs.RootOptions{Tallies: tallies})
	if errors.Is(err, vfs.ErrRootDeleted) || errors.Is(err, vfs.ErrNotExist) {
		return nil
	}
	return err
}
