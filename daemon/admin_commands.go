package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"
)

// The subcommands of `berth admin`: each builds the request of one route
// of the spec from its arguments and prints the answer.

func (a *adminCLI) orgCommand() *cobra.Command {
	org := groupCommand("org", "Organizations: show, create, update, license-key, disable, enable, delete, list, policy", "")

	show := a.simple("show [ORG]", "Show an organization (by id or license key; default: your own)", cobra.MaximumNArgs(1), kindOrg,
		func(ctx context.Context, s *adminSession, args []string) (request, string, error) {
			id, err := a.orgRef(ctx, s, first(args))
			return getReq("/api/2/organization/" + id), "", err
		})

	var parent string
	create := a.simple("create NAME [KEY=VALUE...]", "Create a child organization (fields of the organization object, e.g. description=, email=)", cobra.MinimumNArgs(1), kindOrg,
		func(ctx context.Context, s *adminSession, args []string) (request, string, error) {
			form, err := fields(args[1:], "name")
			if err != nil {
				return request{}, "", err
			}
			form.Set("name", args[0])
			id, err := a.orgID(ctx, s, parent)
			return postReq("/api/2/organization/"+id+"/organizations/create", form), "", err
		})
	create.Flags().StringVar(&parent, "parent", "", "the parent organization (default: your own)")

	update := a.simple("update ORG KEY=VALUE...", "Change an organization's fields (name=, description=, email=, ...)", cobra.MinimumNArgs(2), kindOrg,
		func(ctx context.Context, s *adminSession, args []string) (request, string, error) {
			form, err := fields(args[1:])
			if err != nil {
				return request{}, "", err
			}
			id, err := a.orgID(ctx, s, args[0])
			return postReq("/api/2/organization/"+id+"/update", form), "", err
		})

	licenseKey := a.simple("license-key [ORG]", "Show an organization's license key (default: your own's), which names it wherever an ORG is asked for", cobra.MaximumNArgs(1), kindOrg,
		func(ctx context.Context, s *adminSession, args []string) (request, string, error) {
			id, err := a.orgID(ctx, s, first(args))
			return getReq("/api/2/organization/" + id + "/license_key"), "", err
		})

	org.AddCommand(show, create, update, licenseKey,
		a.orgAction("disable", "Disable an organization and its children: their persons cannot log in", "disabled"),
		a.orgAction("enable", "Enable a disabled organization", "enabled"),
		a.orgDelete(),
		a.listCommand("list", "List the child organizations of --org", "organizations", kindOrg),
		a.policyCommand())
	return org
}

// orgAction is a POST /api/2/organization/<id>/<action> without fields.
func (a *adminCLI) orgAction(action, short, done string) *cobra.Command {
	return a.simple(action+" ORG", short, cobra.ExactArgs(1), kindStatus,
		func(ctx context.Context, s *adminSession, args []string) (request, string, error) {
			id, err := a.orgID(ctx, s, args[0])
			return postReq("/api/2/organization/"+id+"/"+action, nil), "organization " + id + " " + done, err
		})
}

func (a *adminCLI) orgDelete() *cobra.Command {
	var yes *bool
	cmd := a.simple("delete ORG --yes", "Delete an organization, its children, persons and roots", cobra.ExactArgs(1), kindStatus,
		func(ctx context.Context, s *adminSession, args []string) (request, string, error) {
			if !*yes {
				return request{}, "", usageErrorf("org delete: deleting organization %s deletes its children, persons and files: add --yes", args[0])
			}
			id, err := a.orgID(ctx, s, args[0])
			return postReq("/api/2/organization/"+id+"/delete", nil), "organization " + id + " deleted", err
		})
	yes = confirmFlag(cmd)
	return cmd
}

func (a *adminCLI) policyCommand() *cobra.Command {
	policy := groupCommand("policy", "An organization's policy: get, set", "")
	getCmd := a.simple("get [ORG]", "Show an organization's policy (default: your own organization's)", cobra.MaximumNArgs(1), kindPolicy,
		func(ctx context.Context, s *adminSession, args []string) (request, string, error) {
			id, err := a.orgRef(ctx, s, first(args))
			return getReq("/api/2/organization/" + id), "", err
		})
	setCmd := a.simple("set [ORG] KEY=VALUE...", "Change policy fields (e.g. max_file_size=100MiB webdav_enabled=false)", cobra.MinimumNArgs(1), kindPolicy,
		func(ctx context.Context, s *adminSession, args []string) (request, string, error) {
			ref := ""
			if !strings.Contains(args[0], "=") {
				ref, args = args[0], args[1:]
			}
			if len(args) == 0 {
				return request{}, "", usageErrorf("policy set: no KEY=VALUE to set")
			}
			form, err := fields(args)
			if err != nil {
				return request{}, "", err
			}
			id, err := a.orgID(ctx, s, ref)
			return postReq("/api/2/organization/"+id+"/policy/update", form), "", err
		})
	policy.AddCommand(getCmd, setCmd)
	return policy
}

func (a *adminCLI) personCommand() *cobra.Command {
	person := groupCommand("person", "Persons: show, create, update, delete, list, passwd, unlock, device-password", "")

	show := a.simple("show [ID|EMAIL]", "Show a person (default: yourself)", cobra.MaximumNArgs(1), kindPerson,
		func(_ context.Context, _ *adminSession, args []string) (request, string, error) {
			if len(args) == 0 {
				return getReq("/api/2/person"), "", nil
			}
			return getReq("/api/2/person/" + url.PathEscape(args[0])), "", nil
		})

	var (
		org          string
		admin, setPw bool
	)
	create := a.simple("create USERNAME EMAIL [KEY=VALUE...]", "Create a person (first_name=, last_name=, space_quota=)", cobra.MinimumNArgs(2), kindPerson,
		func(ctx context.Context, s *adminSession, args []string) (request, string, error) {
			form, err := fields(args[2:], "username", "email", "company_id", "password")
			if err != nil {
				return request{}, "", err
			}
			form.Set("username", args[0])
			form.Set("email", args[1])
			if admin {
				if form.Has("admin") {
					return request{}, "", usageErrorf("--admin and admin= both given")
				}
				form.Set("admin", "true")
			}
			if setPw {
				pw, err := a.newPassword(ctx)
				if err != nil {
					return request{}, "", err
				}
				form.Set("password", pw)
			}
			id, err := a.orgID(ctx, s, org)
			form.Set("company_id", id)
			return postReq("/api/2/person/create", form), "", err
		})
	create.Flags().StringVar(&org, "org", "", "the organization (default: your own)")
	create.Flags().BoolVar(&admin, "admin", false, "make the person an administrator of the organization")
	create.Flags().BoolVar(&setPw, "password", false, "set an initial password: from "+adminNewPasswordEnv+" or typed twice")

	update := a.simple("update ID|EMAIL KEY=VALUE...", "Change a person's fields (first_name=, email=, space_quota=, admin=, active=)", cobra.MinimumNArgs(2), kindPerson,
		func(ctx context.Context, s *adminSession, args []string) (request, string, error) {
			form, err := fields(args[1:], "password")
			if err != nil {
				return request{}, "", err
			}
			id, err := a.personID(ctx, s, args[0], "person")
			return postReq("/api/2/person/"+id+"/update", form), "", err
		})

	passwd := a.simple("passwd ID|EMAIL", "Set a person's password (from "+adminNewPasswordEnv+" or typed twice; your own also takes the current one)", cobra.ExactArgs(1), kindStatus,
		func(ctx context.Context, s *adminSession, args []string) (request, string, error) {
			id, err := a.personID(ctx, s, args[0], "person")
			if err != nil {
				return request{}, "", err
			}
			self, err := a.selfID(ctx, s)
			if err != nil {
				return request{}, "", err
			}
			form := url.Values{}
			done := "password of person " + id + " set"
			if id == self {
				// berth asks for the current password to change one's
				// own, and the change ends every session of the person,
				// this one included.
				cur, err := a.currentPassword(ctx)
				if err != nil {
					return request{}, "", err
				}
				form.Set("current_password", cur)
				done = "your password is set; it ended your sessions, this one too: run berth admin login again"
			}
			pw, err := a.newPassword(ctx)
			form.Set("password", pw)
			return postReq("/api/2/person/"+id+"/update", form), done, err
		})

	unlock := a.simple("unlock ID|EMAIL", "Clear a person's login lockout", cobra.ExactArgs(1), kindStatus,
		func(ctx context.Context, s *adminSession, args []string) (request, string, error) {
			id, err := a.personID(ctx, s, args[0], "person")
			return postReq("/api/2/person/"+id+"/unlock", nil), "person " + id + " unlocked", err
		})

	// A two-step account's main password is refused over WebDAV, which
	// cannot ask for a code: a device password is what its drive mounts
	// with, and it is made by the account itself, signed in.
	devicePw := a.simple("device-password NAME", "Make a device password of your own (for a WebDAV drive or an app that cannot ask for a code); it is shown once", cobra.ExactArgs(1), kindDevicePassword,
		func(ctx context.Context, s *adminSession, args []string) (request, string, error) {
			self, err := a.selfID(ctx, s)
			if err != nil {
				return request{}, "", err
			}
			cur, err := a.currentPassword(ctx)
			if err != nil {
				return request{}, "", err
			}
			form := url.Values{"name": {args[0]}, "current_password": {cur}}
			return postReq("/api/2/person/"+self+"/device_passwords/create", form), "", nil
		})

	person.AddCommand(show, create, update, a.deleteCommand("person"), passwd, unlock, devicePw,
		a.listCommand("list", "List the persons of --org", "persons", kindPerson))
	return person
}

// deleteCommand is `<what> delete ID|EMAIL --yes` for persons and guests.
func (a *adminCLI) deleteCommand(what string) *cobra.Command {
	var yes *bool
	cmd := a.simple("delete ID|EMAIL --yes", "Delete a "+what, cobra.ExactArgs(1), kindStatus,
		func(ctx context.Context, s *adminSession, args []string) (request, string, error) {
			if !*yes {
				return request{}, "", usageErrorf("%s delete: deleting %s %s cannot be undone: add --yes", what, what, args[0])
			}
			id, err := a.personID(ctx, s, args[0], what)
			return postReq("/api/2/"+what+"/"+id+"/delete", nil), what + " " + id + " deleted", err
		})
	yes = confirmFlag(cmd)
	return cmd
}

func (a *adminCLI) guestCommand() *cobra.Command {
	guest := groupCommand("guest", "Guests: show, create, update, delete, convert, list", "")
	show := a.simple("show ID|EMAIL", "Show a guest", cobra.ExactArgs(1), kindGuest,
		func(_ context.Context, _ *adminSession, args []string) (request, string, error) {
			return getReq("/api/2/guest/" + url.PathEscape(args[0])), "", nil
		})
	var (
		setPw bool
		org   string
	)
	create := a.simple("create EMAIL [KEY=VALUE...]", "Create a guest (first_name=, last_name=)", cobra.MinimumNArgs(1), kindGuest,
		func(ctx context.Context, s *adminSession, args []string) (request, string, error) {
			form, err := fields(args[1:], "email", "password", "company_id")
			if err != nil {
				return request{}, "", err
			}
			form.Set("email", args[0])
			if setPw {
				pw, err := a.newPassword(ctx)
				if err != nil {
					return request{}, "", err
				}
				form.Set("password", pw)
			}
			id, err := a.orgID(ctx, s, org)
			form.Set("company_id", id)
			return postReq("/api/2/guest/create", form), "", err
		})
	create.Flags().BoolVar(&setPw, "password", false, "set a password to log in with: from "+adminNewPasswordEnv+" or typed twice")
	create.Flags().StringVar(&org, "org", "", "the organization (default: your own)")
	update := a.simple("update ID|EMAIL KEY=VALUE...", "Change a guest's fields (first_name=, last_name=, email=, active=)", cobra.MinimumNArgs(2), kindGuest,
		func(ctx context.Context, s *adminSession, args []string) (request, string, error) {
			form, err := fields(args[1:], "password")
			if err != nil {
				return request{}, "", err
			}
			id, err := a.personID(ctx, s, args[0], "guest")
			return postReq("/api/2/guest/"+id+"/update", form), "", err
		})
	convert := a.simple("convert ID|EMAIL", "Convert a guest into a person with a sync root", cobra.ExactArgs(1), kindPerson,
		func(ctx context.Context, s *adminSession, args []string) (request, string, error) {
			id, err := a.personID(ctx, s, args[0], "guest")
			return postReq("/api/2/guest/"+id+"/convert", nil), "", err
		})
	guest.AddCommand(show, create, update, a.deleteCommand("guest"), convert,
		a.listCommand("list", "List the guests of --org", "guests", kindGuest))
	return guest
}

func (a *adminCLI) groupCommand() *cobra.Command {
	group := groupCommand("group", "Groups: show, create, update, delete, members, add, remove, list", "")
	show := a.simple("show ID", "Show a group", cobra.ExactArgs(1), kindGroup,
		func(_ context.Context, _ *adminSession, args []string) (request, string, error) {
			id, err := numericID(args[0], "group")
			return getReq("/api/2/group/" + id), "", err
		})
	var org string
	create := a.simple("create NAME [KEY=VALUE...]", "Create a group", cobra.MinimumNArgs(1), kindGroup,
		func(ctx context.Context, s *adminSession, args []string) (request, string, error) {
			form, err := fields(args[1:], "name", "company_id")
			if err != nil {
				return request{}, "", err
			}
			form.Set("name", args[0])
			id, err := a.orgID(ctx, s, org)
			form.Set("company_id", id)
			return postReq("/api/2/group/create", form), "", err
		})
	create.Flags().StringVar(&org, "org", "", "the organization (default: your own)")
	var fromGroup bool
	members := a.simple("members ID", "Show a group's members", cobra.ExactArgs(1), kindMembers,
		func(_ context.Context, _ *adminSession, args []string) (request, string, error) {
			id, err := numericID(args[0], "group")
			r := getReq("/api/2/group/" + id + "/members")
			if fromGroup {
				r.query = url.Values{"include_from_group": {"true"}}
			}
			return r, "", err
		})
	members.Flags().BoolVar(&fromGroup, "include-from-group", false, "also the members that come through member groups")
	update := a.simple("update ID KEY=VALUE...", "Change a group's fields (name=, active=)", cobra.MinimumNArgs(2), kindGroup,
		func(_ context.Context, _ *adminSession, args []string) (request, string, error) {
			form, err := fields(args[1:])
			if err != nil {
				return request{}, "", err
			}
			id, err := numericID(args[0], "group")
			return postReq("/api/2/group/"+id+"/update", form), "", err
		})
	var yes *bool
	del := a.simple("delete ID --yes", "Delete a group (its members stay)", cobra.ExactArgs(1), kindStatus,
		func(_ context.Context, _ *adminSession, args []string) (request, string, error) {
			id, err := numericID(args[0], "group")
			if err == nil && !*yes {
				err = usageErrorf("group delete: deleting group %s cannot be undone: add --yes", id)
			}
			return postReq("/api/2/group/"+id+"/delete", nil), "group " + id + " deleted", err
		})
	yes = confirmFlag(del)
	group.AddCommand(show, create, update, del, members,
		a.membersCommand("add", "Add persons (by id or e-mail) and, with --group, groups to a group"),
		a.membersCommand("remove", "Remove persons (by id or e-mail) and, with --group, groups from a group"),
		a.listCommand("list", "List the groups of --org", "groups", kindGroup))
	return group
}

// membersCommand is `group add|remove GROUP [PERSON...] [--group ID...]`:
// one POST /api/2/group/<id>/members/update with add_members and
// add_groups (or remove_members and remove_groups), persons named by id
// or e-mail address.
func (a *adminCLI) membersCommand(op, short string) *cobra.Command {
	var groups []string
	cmd := a.simple(op+" GROUP [ID|EMAIL...] [--group ID...]", short, cobra.MinimumNArgs(1), kindStatus,
		func(ctx context.Context, s *adminSession, args []string) (request, string, error) {
			id, err := numericID(args[0], "group")
			if err != nil {
				return request{}, "", err
			}
			if len(args) == 1 && len(groups) == 0 {
				return request{}, "", usageErrorf("group %s: no person or --group to %s", op, op)
			}
			var gids []string
			for _, g := range groups {
				gid, err := numericID(g, "group")
				if err != nil {
					return request{}, "", err
				}
				gids = append(gids, gid)
			}
			var pids []string
			for _, ref := range args[1:] {
				if !digits.MatchString(ref) && !strings.Contains(ref, "@") {
					return request{}, "", usageErrorf("%q is neither a person id nor an e-mail address", ref)
				}
			}
			for _, ref := range args[1:] {
				pid, err := a.personID(ctx, s, ref, "person")
				if err != nil {
					return request{}, "", err
				}
				pids = append(pids, pid)
			}
			form := url.Values{}
			if len(pids) > 0 {
				form.Set(op+"_members", strings.Join(pids, ","))
			}
			if len(gids) > 0 {
				form.Set(op+"_groups", strings.Join(gids, ","))
			}
			return postReq("/api/2/group/"+id+"/members/update", form), "group " + id + ": members updated", nil
		})
	cmd.Flags().StringSliceVar(&groups, "group", nil, "a group id to "+op+" as a member group (repeat, or separate with commas)")
	return cmd
}

func first(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

var digits = regexp.MustCompile(`^[0-9]+$`)

func numericID(ref, what string) (string, error) {
	if !digits.MatchString(ref) {
		return "", usageErrorf("%q is not a %s id", ref, what)
	}
	return ref, nil
}

// orgRef is what GET /api/2/organization/<ref> takes: an id or a license
// key as given, or the caller's own organization's id.
func (a *adminCLI) orgRef(ctx context.Context, s *adminSession, ref string) (string, error) {
	if ref == "" {
		return a.orgID(ctx, s, "")
	}
	return url.PathEscape(ref), nil
}

// orgID is the numeric id the POST routes take: ref itself when it is
// one, the caller's organization when empty, else the id of the
// organization whose license key ref is.
func (a *adminCLI) orgID(ctx context.Context, s *adminSession, ref string) (string, error) {
	var obj struct {
		ID        json.Number `json:"id"`
		CompanyID json.Number `json:"company_id"`
	}
	switch {
	case digits.MatchString(ref):
		return ref, nil
	case ref == "":
		if err := s.call(ctx, http.MethodGet, "/api/2/person", nil, nil, &obj); err != nil {
			return "", err
		}
		return obj.CompanyID.String(), nil
	}
	if err := s.call(ctx, http.MethodGet, "/api/2/organization/"+url.PathEscape(ref), nil, nil, &obj); err != nil {
		return "", err
	}
	return obj.ID.String(), nil
}

// selfID is the logged-in person's id.
func (a *adminCLI) selfID(ctx context.Context, s *adminSession) (string, error) {
	var me struct {
		ID json.Number `json:"id"`
	}
	if err := s.call(ctx, http.MethodGet, "/api/2/person", nil, nil, &me); err != nil {
		return "", err
	}
	return me.ID.String(), nil
}

// personID is the numeric id of a person or guest (what) named by id or
// e-mail address.
func (a *adminCLI) personID(ctx context.Context, s *adminSession, ref, what string) (string, error) {
	if digits.MatchString(ref) {
		return ref, nil
	}
	if !strings.Contains(ref, "@") {
		return "", usageErrorf("%q is neither a %s id nor an e-mail address", ref, what)
	}
	var obj struct {
		ID json.Number `json:"id"`
	}
	if err := s.call(ctx, http.MethodGet, "/api/2/"+what+"/"+url.PathEscape(ref), nil, nil, &obj); err != nil {
		return "", err
	}
	return obj.ID.String(), nil
}

var fieldName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// sizeFields take byte counts; a size with a unit (10GiB, 500 MB) is
// turned into the bytes the API takes.
var sizeFields = map[string]bool{"space_quota": true, "max_file_size": true}

// fields turns KEY=VALUE arguments into form fields, the API's own names
// (snake_case, as its objects spell them). reserved are fields the
// command sets itself.
func fields(args []string, reserved ...string) (url.Values, error) {
	form := url.Values{}
	for _, arg := range args {
		k, v, ok := strings.Cut(arg, "=")
		switch {
		case !ok:
			return nil, usageErrorf("%q is not KEY=VALUE", arg)
		case !fieldName.MatchString(k):
			return nil, usageErrorf("%q is not a field name (lower case, digits and _, as the API's objects spell them)", k)
		case form.Has(k):
			return nil, usageErrorf("field %s given twice", k)
		}
		for _, r := range reserved {
			if k == r {
				return nil, usageErrorf("field %s is not a KEY=VALUE here (it has its own argument or flag)", k)
			}
		}
		if sizeFields[k] && v != "" && !digits.MatchString(v) {
			n, err := humanize.ParseBytes(v)
			if err != nil {
				return nil, usageErrorf("%s=%s: not a size (bytes, or e.g. 10GiB, 500MB)", k, v)
			}
			v = strconv.FormatUint(n, 10)
		}
		form.Set(k, v)
	}
	return form, nil
}

// list prints one page of a paged list, or every page with --all.
func (a *adminCLI) list(ctx context.Context, s *adminSession, path string, pf pageFlags, k kind) error {
	var all []json.RawMessage
	offset, total := pf.offset, 0
	for {
		var env struct {
			Offset  int               `json:"offset"`
			Results []json.RawMessage `json:"results"`
			Total   int               `json:"total"`
		}
		q := url.Values{"offset": {strconv.Itoa(offset)}, "limit": {strconv.Itoa(pf.limit)}}
		if err := s.call(ctx, http.MethodGet, path, q, nil, &env); err != nil {
			return err
		}
		all = append(all, env.Results...)
		total = env.Total
		offset += len(env.Results)
		if !pf.all || len(env.Results) == 0 || offset >= total {
			break
		}
	}
	return a.printList(pf.offset, all, total, k)
}
