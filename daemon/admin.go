package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/oauth2"
	"golang.org/x/term"

	"berth/rest"
)

// `berth admin` is the administrator's everyday tool over a running
// berth's REST API (persons, organizations, passwords, unlock, policy), as
// `mc admin` is MinIO's. Each subcommand is one call of a route of the
// spec (or two, where a name is resolved to an id first); what berth
// allows is berth's to decide, so the tool checks nothing but its
// arguments.

// Environment variables of `berth admin`, for scripts: a password is
// never a flag, which ps would show.
const (
	adminPasswordEnv    = "BERTH_PASSWORD"     // login's password
	adminNewPasswordEnv = "BERTH_NEW_PASSWORD" // person passwd's and person create --password's
	adminAuthCodeEnv    = "BERTH_AUTH_CODE"    // login's two-step code
)

// adminIO is what `berth admin` reads and writes besides the network:
// the terminal for passwords and the environment, passed in so tests
// drive the commands in-process.
type adminIO struct {
	in     *os.File // the terminal passwords are read from; nil: none
	out    io.Writer
	errw   io.Writer
	getenv func(string) string
}

// adminCLI holds the flags every admin subcommand shares.
type adminCLI struct {
	io         adminIO
	configPath string
	jsonOut    bool
}

// newAdminCommand builds `berth admin` and its subcommands.
func newAdminCommand(aio adminIO) *cobra.Command {
	a := &adminCLI{io: aio}
	admin := groupCommand("admin", "Administer a running berth over its REST API (persons, organizations, policy)",
		"admin talks to a running berth over HTTPS, as its REST API allows the\n"+
			"logged-in person. Log in once with `berth admin login`; the session is\n"+
			"kept in $XDG_CONFIG_HOME/berth/admin.json (0600).\n\n"+
			"Exit status: 0 done; 1 the API answered with an error; 2 bad arguments;\n"+
			"3 cannot connect, TLS failed, not logged in or the session ended.")
	admin.PersistentFlags().StringVar(&a.configPath, "config", "", "the session file (default $XDG_CONFIG_HOME/berth/admin.json)")
	admin.PersistentFlags().BoolVar(&a.jsonOut, "json", false, "print the API's JSON answer instead of a table")
	admin.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErrorf("%v", err) })
	// The server's flags are persistent on the root, so cobra would list
	// all of them under every admin command, where they mean nothing.
	admin.SetUsageTemplate(strings.Replace(adminUsage, "ADMINFLAGS", strings.TrimRight(admin.PersistentFlags().FlagUsages(), " \n"), 1))
	admin.AddCommand(a.loginCommand(), a.logoutCommand(), a.orgCommand(), a.personCommand(), a.guestCommand(), a.groupCommand())
	return admin
}

// adminUsage is cobra's usage template but for the global flags, of
// which it shows only admin's own.
const adminUsage = `Usage:{{if .Runnable}}
  {{.UseLine}}{{end}}{{if .HasAvailableSubCommands}}
  {{.CommandPath}} [command]{{end}}{{if .HasAvailableSubCommands}}

Available Commands:{{range .Commands}}{{if .IsAvailableCommand}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{if .HasAvailableLocalFlags}}

Flags:
{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasParent}}{{if .Parent.HasParent}}

Admin flags:
ADMINFLAGS{{end}}{{end}}{{if .HasAvailableSubCommands}}

Use "{{.CommandPath}} [command] --help" for more information about a command.{{end}}
`

// groupCommand is a command that only holds subcommands. An unknown
// subcommand is a usage error (cobra would print the help and succeed).
func groupCommand(use, short, long string) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return usageErrorf("unknown command %q for %q (see %s --help)", args[0], cmd.CommandPath(), cmd.CommandPath())
		},
	}
}

// leaf is a subcommand whose arguments are checked by args (usage errors,
// exit 2).
func leaf(use, short string, args cobra.PositionalArgs, run func(cmd *cobra.Command, args []string) error) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args: func(cmd *cobra.Command, a []string) error {
			if err := args(cmd, a); err != nil {
				return usageErrorf("%s: %v", cmd.CommandPath(), err)
			}
			return nil
		},
		RunE: run,
	}
}

func (a *adminCLI) path() (string, error) {
	if a.configPath != "" {
		return a.configPath, nil
	}
	return defaultAdminConfig()
}

func (a *adminCLI) session() (*adminSession, error) {
	p, err := a.path()
	if err != nil {
		return nil, err
	}
	return openAdminSession(p)
}

// readSecret reads a password from the terminal without echo; prompt
// goes to standard error so standard output stays the answer. Main
// catches SIGINT into ctx, so ^C at the prompt ends the wait here and
// gives the terminal its echo back.
func (a *adminCLI) readSecret(ctx context.Context, prompt string) (string, error) {
	if a.io.in == nil || !term.IsTerminal(int(a.io.in.Fd())) {
		return "", errNoTerminal
	}
	fd := int(a.io.in.Fd())
	state, err := term.GetState(fd)
	if err != nil {
		return "", err
	}
	fmt.Fprint(a.io.errw, prompt)
	type read struct {
		b   []byte
		err error
	}
	ch := make(chan read, 1)
	go func() {
		b, err := term.ReadPassword(fd)
		ch <- read{b, err}
	}()
	select {
	case r := <-ch:
		fmt.Fprintln(a.io.errw)
		return string(r.b), r.err
	case <-ctx.Done():
		_ = term.Restore(fd, state)
		fmt.Fprintln(a.io.errw)
		return "", ctx.Err()
	}
}

var errNoTerminal = errors.New("no terminal to read it from")

// newPassword is a password to set: from BERTH_NEW_PASSWORD, or typed
// twice on the terminal.
func (a *adminCLI) newPassword(ctx context.Context) (string, error) {
	if p := a.io.getenv(adminNewPasswordEnv); p != "" {
		return p, nil
	}
	p, err := a.readSecret(ctx, "New password: ")
	if errors.Is(err, errNoTerminal) {
		return "", usageErrorf("a new password: set %s or run on a terminal", adminNewPasswordEnv)
	}
	if err != nil {
		return "", err
	}
	again, err := a.readSecret(ctx, "Again: ")
	if err != nil {
		return "", err
	}
	if p != again {
		return "", usageErrorf("the two passwords differ")
	}
	if p == "" {
		return "", usageErrorf("the password is empty")
	}
	return p, nil
}

// currentPassword is the logged-in person's password, which berth asks
// for to change it: from BERTH_PASSWORD, or typed on the terminal.
func (a *adminCLI) currentPassword(ctx context.Context) (string, error) {
	if p := a.io.getenv(adminPasswordEnv); p != "" {
		return p, nil
	}
	p, err := a.readSecret(ctx, "Current password: ")
	if errors.Is(err, errNoTerminal) {
		return "", usageErrorf("your current password: set %s or run on a terminal", adminPasswordEnv)
	}
	return p, err
}

// authCode is the two-step code of a login: from BERTH_AUTH_CODE, or
// typed on the terminal.
func (a *adminCLI) authCode(ctx context.Context) (string, error) {
	if c := a.io.getenv(adminAuthCodeEnv); c != "" {
		return c, nil
	}
	c, err := a.readSecret(ctx, "Two-step code: ")
	if errors.Is(err, errNoTerminal) {
		return "", usageErrorf("login: this account uses two-step verification: set %s to a code or run on a terminal", adminAuthCodeEnv)
	}
	return strings.TrimSpace(c), err
}

func (a *adminCLI) loginCommand() *cobra.Command {
	var (
		base, user, ca string
		insecure       bool
	)
	cmd := leaf("login", "Log in to a running berth and keep the session", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error {
			return a.login(cmd.Context(), base, user, ca, insecure)
		})
	cmd.Long = "login does the OAuth2 password grant and stores berth's URL, how to trust its\n" +
		"certificate and the refresh token in the session file (0600). The password is\n" +
		"read from the terminal without echo, or from " + adminPasswordEnv + " for scripts.\n" +
		"The refresh token rotates on every refresh; the file always holds the newest."
	cmd.Flags().StringVar(&base, "url", "", "berth's base URL, e.g. https://127.0.0.1:8443 (required)")
	cmd.Flags().StringVar(&user, "user", "", "username or e-mail address (required)")
	cmd.Flags().StringVar(&ca, "ca", "", "PEM file of the CA (or self-signed certificate) that signs berth's certificate")
	cmd.Flags().BoolVar(&insecure, "insecure-skip-verify", false, "trust any certificate (tests only: anyone between can read the password)")
	return cmd
}

func (a *adminCLI) login(ctx context.Context, base, user, ca string, insecure bool) error {
	switch {
	case base == "":
		return usageErrorf("login: --url is required")
	case user == "":
		return usageErrorf("login: --user is required")
	case ca != "" && insecure:
		return usageErrorf("login: --ca and --insecure-skip-verify exclude each other")
	}
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "https" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return usageErrorf("login: --url %q is not https://HOST[:PORT] (berth serves HTTPS only)", base)
	}
	base = "https://" + u.Host
	if ca != "" {
		if ca, err = filepath.Abs(ca); err != nil {
			return usageErrorf("login: --ca: %v", err)
		}
	}
	path, err := a.path()
	if err != nil {
		return err
	}
	password := a.io.getenv(adminPasswordEnv)
	if password == "" {
		password, err = a.readSecret(ctx, "Password for "+user+": ")
		if errors.Is(err, errNoTerminal) {
			return usageErrorf("login: a password: set %s or run on a terminal", adminPasswordEnv)
		}
		if err != nil {
			return err
		}
	}
	client, err := newAdminHTTPClient(ca, insecure)
	if err != nil {
		return err
	}
	tok, err := oauthConfig(base).PasswordCredentialsToken(context.WithValue(ctx, oauth2.HTTPClient, client), user, password)
	if re := (*oauth2.RetrieveError)(nil); errors.As(err, &re) && re.ErrorCode == "missing_totp" {
		// A two-step account: the password was right, the code is
		// asked for now (spec 5.4's auth_code).
		code, cerr := a.authCode(ctx)
		if cerr != nil {
			return cerr
		}
		tok, err = passwordGrantWithCode(ctx, client, base, user, password, code)
	}
	if err != nil {
		return fmt.Errorf("login: %w", grantError(err))
	}
	prev, _ := loadAdminConfig(path)
	cfg := &adminConfig{URL: base, Username: user, CAFile: ca, InsecureSkipVerify: insecure}
	cfg.setToken(tok)
	if err := saveAdminConfig(path, cfg); err != nil {
		return fmt.Errorf("login: saving the session: %w", err)
	}
	if prev != nil {
		// The session this one replaces would otherwise stay live until
		// its refresh token expires. Best effort: it may be another
		// berth's, or that berth may be gone.
		if c, err := prev.httpClient(); err == nil {
			_ = (&adminSession{path: path, cfg: prev, client: c}).revoke(ctx)
		}
	}
	s := &adminSession{path: path, cfg: cfg, client: client}
	var me map[string]any
	if err := s.call(ctx, http.MethodGet, "/api/2/person", nil, nil, &me); err != nil {
		return fmt.Errorf("login: %w", err)
	}
	fmt.Fprintf(a.io.out, "logged in to %s as %v (person %v of organization %v); session kept in %s\n",
		base, me["username"], jsonNum(me["id"]), jsonNum(me["company_id"]), path)
	return nil
}

func (a *adminCLI) logoutCommand() *cobra.Command {
	var force bool
	cmd := leaf("logout", "Revoke the session at berth and remove the session file", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error {
			path, err := a.path()
			if err != nil {
				return err
			}
			s, err := openAdminSession(path)
			if err != nil {
				return err
			}
			if err := s.revoke(cmd.Context()); err != nil {
				if !force {
					return fmt.Errorf("logout: revoking at %s: %w (the session file is kept; --force removes it anyway, and the session then lives until it expires)", s.cfg.URL, err)
				}
				fmt.Fprintf(a.io.errw, "berth: logout: revoking at %s failed: %v; removing the session file anyway\n", s.cfg.URL, err)
			}
			if err := os.Remove(path); err != nil {
				return err
			}
			os.Remove(path + ".lock")
			fmt.Fprintf(a.io.out, "logged out of %s\n", s.cfg.URL)
			return nil
		})
	cmd.Flags().BoolVar(&force, "force", false, "remove the session file even when berth cannot be told")
	return cmd
}

// pageFlags are the paging options of every list (spec 4.5; berth's
// parameters offset and limit).
type pageFlags struct {
	offset, limit int
	all           bool
}

func (p *pageFlags) register(fs *pflag.FlagSet) {
	fs.IntVar(&p.offset, "offset", 0, "index of the first item")
	fs.IntVar(&p.limit, "limit", rest.MaxPageSize, fmt.Sprintf("items per page, 1 to %d", rest.MaxPageSize))
	fs.BoolVar(&p.all, "all", false, "every page, not one")
}

func (p *pageFlags) check() error {
	if p.offset < 0 {
		return usageErrorf("--offset must be 0 or more")
	}
	if p.limit < 1 || p.limit > rest.MaxPageSize {
		return usageErrorf("--limit must be from 1 to %d", rest.MaxPageSize)
	}
	return nil
}

// ctxTimeout is the whole command's deadline on top of each request's.
func ctxTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, 10*time.Minute)
}

// kind names what a route answers, for the table printers.
type kind string

const (
	kindOrg    kind = "organization"
	kindPerson kind = "person"
	kindGuest  kind = "guest"
	kindGroup  kind = "group"
	kindPolicy kind = "policy"
	kindStatus kind = "status"
	// kindDevicePassword is one device password, its secret shown once.
	kindDevicePassword kind = "device_password"
)

// request is one API call a subcommand makes, built from its arguments
// before anything is sent (and so testable without a server).
type request struct {
	method string
	path   string
	query  url.Values
	form   url.Values
}

func getReq(path string) request { return request{method: http.MethodGet, path: path} }

func postReq(path string, form url.Values) request {
	if form == nil {
		form = url.Values{}
	}
	return request{method: http.MethodPost, path: path, form: form}
}

// do sends r and prints its answer as k.
func (a *adminCLI) do(ctx context.Context, s *adminSession, r request, k kind, done string) error {
	var raw json.RawMessage
	if err := s.call(ctx, r.method, r.path, r.query, r.form, &raw); err != nil {
		return err
	}
	return a.print(raw, k, done)
}

// run opens the session and runs fn within the command's deadline.
func (a *adminCLI) run(cmd *cobra.Command, fn func(ctx context.Context, s *adminSession) error) error {
	s, err := a.session()
	if err != nil {
		return err
	}
	ctx, cancel := ctxTimeout(cmd.Context())
	defer cancel()
	return fn(ctx, s)
}

// simple is a subcommand that sends one request built from its arguments.
func (a *adminCLI) simple(use, short string, args cobra.PositionalArgs, k kind, build func(ctx context.Context, s *adminSession, args []string) (request, string, error)) *cobra.Command {
	return leaf(use, short, args, func(cmd *cobra.Command, args []string) error {
		return a.run(cmd, func(ctx context.Context, s *adminSession) error {
			r, done, err := build(ctx, s, args)
			if err != nil {
				return err
			}
			return a.do(ctx, s, r, k, done)
		})
	})
}

// listCommand is a paged list of the organization given by --org (the
// caller's own by default): GET /api/2/organization/<id>/<what>.
func (a *adminCLI) listCommand(use, short, what string, k kind) *cobra.Command {
	var (
		pf  pageFlags
		org string
	)
	cmd := leaf(use, short, cobra.NoArgs, func(cmd *cobra.Command, _ []string) error {
		if err := pf.check(); err != nil {
			return err
		}
		return a.run(cmd, func(ctx context.Context, s *adminSession) error {
			id, err := a.orgID(ctx, s, org)
			if err != nil {
				return err
			}
			return a.list(ctx, s, "/api/2/organization/"+id+"/"+what, pf, k)
		})
	})
	pf.register(cmd.Flags())
	cmd.Flags().StringVar(&org, "org", "", "organization id or license key (default: your own)")
	return cmd
}

// confirmFlag is --yes, without which a delete refuses: a slip of the
// keyboard should not delete an organization's every file.
func confirmFlag(cmd *cobra.Command) *bool {
	return cmd.Flags().Bool("yes", false, "really delete (required)")
}
