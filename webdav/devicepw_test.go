package webdav_test

import (
	"context"
	"errors"
	"github.com/pquerna/otp/totp"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"berth/account"
)

// twoStepFixture is a fixture whose alice has enrolled in two-step
// verification with an authenticator, which makes her one who signs in
// over Basic with device passwords only (account.NeedsDevicePassword).
func twoStepFixture(t *testing.T, lo account.LockoutOptions) *fixture {
	t.Helper()
	f := newFixtureWith(t, fixtureOptions{Lockout: lo})
	ctx := context.Background()
	en, err := f.accounts.EnrollTwoStep(ctx, f.person.ID, account.TwoStepAuthenticator, "")
	if err != nil {
		t.Fatal(err)
	}
	code, err := totp.GenerateCode(en.Secret, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.accounts.ConfirmTwoStep(ctx, f.person.ID, code); err != nil {
		t.Fatal(err)
	}
	return f
}

// devicePassword makes a device password for alice and returns it with
// its secret.
func (f *fixture) devicePassword(name string) (account.DevicePassword, string) {
	f.t.Helper()
	dp, secret, err := f.accounts.CreateDevicePassword(context.Background(), f.person.ID, account.DevicePasswordInput{Name: name})
	if err != nil {
		f.t.Fatal(err)
	}
	return dp, secret
}

// propfindAs sends PROPFIND Depth 0 of alice's top with Basic login and
// password ("" login: Bearer password).
func (f *fixture) propfindAs(login, pass string) (int, http.Header, string) {
	f.t.Helper()
	req, _ := http.NewRequest("PROPFIND", f.url("/"), nil)
	req.Header.Set("Depth", "0")
	if login == "" {
		req.Header.Set("Authorization", "Bearer "+pass)
	} else {
		req.SetBasicAuth(login, pass)
	}
	return f.send(req)
}

// TestDevicePasswords: who gets in over Basic when device passwords are
// in play. A row per case, each on a fresh server.
func TestDevicePasswords(t *testing.T) {
	runCases(t, []davCase{
		// Two-step: the right main password is refused with 401, a
		// challenge and a text that says what to do, and the log says
		// so; a device password and a Bearer token get in.
		{"two-step: the main password is refused, a device password and Bearer get in", func(t *testing.T) {
			f := twoStepFixture(t, account.LockoutOptions{})
			for i := range 2 { // the second time from the remembered login
				st, h, body := f.propfindAs("alice", password)
				want(t, "main password "+strconv.Itoa(i), st, http.StatusUnauthorized, body)
				contains(t, body, "two-step verification", "device password", "device_passwords/create")
				if !strings.HasPrefix(h.Get("WWW-Authenticate"), `Basic realm="berth"`) {
					t.Fatalf("WWW-Authenticate = %q", h.Get("WWW-Authenticate"))
				}
			}
			contains(t, f.logs.String(), "main password refused", "login=alice")
			_, secret := f.devicePassword("laptop")
			for _, login := range []string{"alice", f.person.Email} {
				st, _, body := f.propfindAs(login, secret)
				want(t, "device password as "+login, st, http.StatusMultiStatus, body)
			}
			st, _, body := f.propfindAs("", f.token)
			want(t, "bearer", st, http.StatusMultiStatus, body)
			// Another person's login with alice's device password is a
			// wrong password.
			f.addPerson("bob")
			st, _, body = f.propfindAs("bob", secret)
			want(t, "bob with alice's device password", st, http.StatusUnauthorized, body)
			contains(t, body, "Log in with your berth username")
		}},

		// The machine's sessions, and its device passwords, end with it;
		// a revoked device password is told so at the next request.
		{"revoking, deleting the machine and deleting the person end it at the next request", func(t *testing.T) {
			f := twoStepFixture(t, account.LockoutOptions{})
			ctx := context.Background()
			dp, secret := f.devicePassword("laptop")
			dp2, secret2 := f.devicePassword("phone")
			dp3, secret3 := f.devicePassword("tablet")
			for _, s := range []string{secret, secret2, secret3} {
				st, _, body := f.propfindAs("alice", s)
				want(t, "before", st, http.StatusMultiStatus, body)
			}
			if err := f.accounts.RevokeDevicePassword(ctx, f.person.ID, dp.ID); err != nil {
				t.Fatal(err)
			}
			st, _, body := f.propfindAs("alice", secret)
			want(t, "revoked", st, http.StatusUnauthorized, body)
			contains(t, body, "revoked")
			if err := f.accounts.DeleteMachine(ctx, dp2.MachineID); err != nil {
				t.Fatal(err)
			}
			st, _, body = f.propfindAs("alice", secret2)
			want(t, "machine deleted", st, http.StatusUnauthorized, body)
			st, _, body = f.propfindAs("alice", secret3)
			want(t, "the third", st, http.StatusMultiStatus, body)
			if err := f.accounts.DeletePerson(ctx, dp3.PersonID); err != nil {
				t.Fatal(err)
			}
			st, _, body = f.propfindAs("alice", secret3)
			want(t, "person deleted", st, http.StatusUnauthorized, body)
		}},

		// Wrong passwords of a two-step account count toward the lockout
		// like any other, and the lock refuses device passwords too.
		{"wrong passwords lock the account, device passwords included", func(t *testing.T) {
			f := twoStepFixture(t, account.LockoutOptions{MaxFailures: 2, Window: time.Hour, Duration: time.Hour})
			_, secret := f.devicePassword("laptop")
			st, _, body := f.propfindAs("alice", "wrong")
			want(t, "wrong 1", st, http.StatusUnauthorized, body)
			// A device password's shape, not one of alice's.
			st, _, body = f.propfindAs("alice", strings.Repeat("a", 32))
			want(t, "wrong 2 locks", st, http.StatusForbidden, body)
			st, _, body = f.propfindAs("alice", secret)
			want(t, "device password while locked", st, http.StatusForbidden, body)
			contains(t, body, "locked")
		}},

		// Without two-step both work; turning it on refuses a main
		// password the server remembers, at the next request.
		{"without two-step, both; require_two_step_auth refuses a remembered main password at once", func(t *testing.T) {
			f := newFixture(t)
			_, secret := f.devicePassword("laptop")
			for _, s := range []string{password, secret, password} {
				st, _, body := f.propfindAs("alice", s)
				want(t, "without two-step", st, http.StatusMultiStatus, body)
			}
			if _, err := f.accounts.UpdatePolicy(context.Background(), f.org.ID, func(p *account.Policy) error {
				p.RequireTwoStepAuth = true
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			// Not enrolled yet: nothing gets in until she enrolls, as the
			// API lets her do nothing else; enrolled, the main password
			// is refused and the device password gets in.
			st, _, body := f.propfindAs("alice", password)
			want(t, "remembered main password", st, http.StatusForbidden, body)
			contains(t, body, "requires two-step verification")
			for _, cred := range [][2]string{{"alice", secret}, {"", f.token}} {
				st, _, body = f.propfindAs(cred[0], cred[1])
				want(t, "before enrolling", st, http.StatusForbidden, body)
				contains(t, body, "requires two-step verification")
			}
			ctx := context.Background()
			en, err := f.accounts.EnrollTwoStep(ctx, f.person.ID, account.TwoStepAuthenticator, "")
			if err != nil {
				t.Fatal(err)
			}
			code, _ := totp.GenerateCode(en.Secret, time.Now())
			if _, err := f.accounts.ConfirmTwoStep(ctx, f.person.ID, code); err != nil {
				t.Fatal(err)
			}
			st, _, body = f.propfindAs("alice", password)
			want(t, "main password, enrolled", st, http.StatusUnauthorized, body)
			contains(t, body, "two-step verification")
			st, _, body = f.propfindAs("alice", secret)
			want(t, "device password", st, http.StatusMultiStatus, body)
		}},
	})
}

// TestRcloneDevicePassword (issue 14, "Done when"): rclone mounts a
// two-step account's files with a device password; the main password is
// refused over Basic; revoking the device ends the mount's access at its
// next request. Where the environment refuses to mount, rclone's own
// commands stand in for the mount.
func TestRcloneDevicePassword(t *testing.T) {
	bin := needTool(t, "rclone")
	f := twoStepFixture(t, account.LockoutOptions{})
	ctx := context.Background()
	req, _ := http.NewRequest(http.MethodPut, f.url("/hello.txt"), strings.NewReader("hello from berth\n"))
	req.Header.Set("Authorization", "Bearer "+f.token)
	st, _, body := f.send(req)
	want(t, "PUT with Bearer", st, http.StatusCreated, body)
	dp, secret := f.devicePassword("rclone")

	rc := func(remote string, args ...string) (string, error) {
		t.Helper()
		base := []string{"--no-check-certificate", "--config", "/dev/null", "--retries", "1", "--low-level-retries", "1"}
		out, err := run(ctx, 60*time.Second, bin, append(base, append(args[:len(args):len(args)], remote)...)...)
		return string(out), err
	}
	device := rcloneRemoteAs(t, bin, f, "alice", secret)
	main := rcloneRemoteAs(t, bin, f, "alice", password)

	if out, err := rc(main, "lsf"); err == nil {
		t.Fatalf("rclone lsf with the main password of a two-step account succeeded:\n%s", out)
	} else {
		t.Logf("the main password, refused as it should be: %v\n%s", err, out)
	}
	if out, err := rc(device, "lsf"); err != nil || !strings.Contains(out, "hello.txt") {
		t.Fatalf("rclone lsf with the device password: %v\n%s", err, out)
	}

	fusermount, ferr := exec.LookPath("fusermount3")
	if ferr != nil {
		fusermount, ferr = exec.LookPath("fusermount")
	}
	var mnt string
	var merr error
	if ferr == nil {
		mnt, _, merr = mountRcloneRemote(t, bin, fusermount, device)
	} else {
		merr = errRefused
	}
	switch {
	case errors.Is(merr, errRefused):
		t.Logf("rclone mount refused here (%v); rclone's commands stand in for it", merr)
	case merr != nil:
		t.Fatal(merr)
	default:
		t.Logf("mounted with rclone mount at %s", mnt)
		b, err := os.ReadFile(filepath.Join(mnt, "hello.txt"))
		if err != nil || string(b) != "hello from berth\n" {
			t.Fatalf("reading through the mount: %q, %v", b, err)
		}
		if err := os.WriteFile(filepath.Join(mnt, "from the mount.txt"), []byte("written\n"), 0o644); err != nil {
			t.Fatalf("writing through the mount: %v", err)
		}
		if got, err := f.read("/from the mount.txt"); err != nil || string(got) != "written\n" {
			t.Fatalf("what the mount wrote, read through vfs: %q, %v", got, err)
		}
	}

	if err := f.accounts.RevokeDevicePassword(ctx, f.person.ID, dp.ID); err != nil {
		t.Fatal(err)
	}
	if mnt != "" {
		// The mount keeps nothing (--dir-cache-time 0s, no VFS cache):
		// its next listing and its next read ask the server, and fail.
		if ents, err := os.ReadDir(mnt); err == nil {
			t.Fatalf("listing the mount after the revocation worked: %d entries", len(ents))
		}
		if b, err := os.ReadFile(filepath.Join(mnt, "hello.txt")); err == nil {
			t.Fatalf("reading through the mount after the revocation worked: %q", b)
		}
	}
	if out, err := rc(device, "lsf"); err == nil {
		t.Fatalf("rclone lsf with the revoked device password succeeded:\n%s", out)
	}
	if !strings.Contains(f.logs.String(), "status=401") {
		t.Errorf("no 401 in the server log:\n%s", f.logs.String())
	}
}
