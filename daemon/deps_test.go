package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// allowedImports is DESIGN.md's dependency direction: each component and
// the berth components it may import. A component is a package and the
// packages under it (vfs/chunk/chunktest belongs to vfs/chunk), except
// where a longer entry claims them. "*" allows every component.
func allowedImports() map[string][]string {
	return map[string][]string{
		"berth":  {"daemon"}, // main.go
		"config": {},
		// atomicfile replaces small files whole and durably, for the
		// daemon and the agent alike.
		"atomicfile": {},
		"kv":         {},
		"kv/badger":  {"kv"},
		// kvtest is the conformance suite every engine passes; like
		// berthtest, only test files may import it.
		"kv/kvtest": {"kv"},
		"vfs/chunk": {},
		"vfs":       {"kv", "vfs/chunk"},
		"account":   {"kv"},
		"activity":  {"kv"},
		// agentlink is the server's end of the agents' channel: who is
		// connected, and calls to them; in a cluster, which node holds
		// which machine, in the metadata store.
		"agentlink": {"kv"},
		"share":     {"kv", "vfs", "account"},
		"httpserve": {"vfs"},
		// The front ends map every domain error, kv's and the chunk
		// store's among them, in their one table: that is all they may
		// take from kv and vfs/chunk (DESIGN.md).
		"rest":   {"vfs", "account", "activity", "share", "httpserve", "kv", "vfs/chunk", "agentlink"},
		"webdav": {"vfs", "account", "activity", "share", "httpserve", "kv", "vfs/chunk"},
		"web":    {"vfs", "account", "activity", "share", "httpserve", "kv", "vfs/chunk"},
		// agent is `berth agent`, a client of the REST API: it may
		// chunk files locally and nothing more of berth's.
		"agent":  {"vfs/chunk", "atomicfile"},
		"daemon": {"*"},
		// berthtest builds the storage stack for the front ends' tests;
		// only test files may import it (see TestImportDirection).
		"berthtest": {"kv", "kv/badger", "vfs/chunk", "vfs", "account", "share", "httpserve"},
		"bench":     {"*"},

		// mail sends through an SMTP server and knows nothing of berth;
		// mailtest, its test server, only test files may import.
		"mail":          {},
		"mail/mailtest": {},

		// The engine for several nodes (scale-out); pgtest, its test
		// server, belongs to it.
		"kv/postgres": {"kv"},
		// The S3 chunk store speaks HTTP to its server (vfs/chunk may
		// not); s3test, the server its tests start, only test files use.
		"vfs/chunk/s3": {"vfs/chunk"},
	}
}

// exclusiveModules are packages (and the packages under them) only one
// component may import: an engine stays behind the interface that hides
// it, and x/net/webdav's types stay out of the other front ends.
func exclusiveModules() map[string]string {
	return map[string]string{
		"github.com/dgraph-io/badger/v4": "kv/badger",
		"github.com/jackc/pgx/v5":        "kv/postgres",
		"github.com/spf13/viper":         "config",
		"github.com/spf13/cobra":         "daemon",
		"golang.org/x/net/webdav":        "webdav",
	}
}

// forbiddenImports are packages that the listed components may not import
// directly, with the reason; "*" is every berth component. (Tailscale's
// deptest keeps its BadDeps the same way.) The domain packages stay free
// of HTTP so that a front end, not a store, decides what a request is.
func forbiddenImports() map[string]struct {
	from   []string
	reason string
} {
	domain := []string{"config", "kv", "vfs", "vfs/chunk", "account", "activity"}
	return map[string]struct {
		from   []string
		reason string
	}{
		"net/http": {domain, "the domain packages know nothing of HTTP; front ends translate"},
		"github.com/prometheus/client_golang/prometheus/promauto": {[]string{"*"},
			"metrics are built from an injected prometheus.Registerer (STYLE.md 12)"},
	}
}

// component maps an import path of the module to its component, or "" for
// a package outside berth.
func component(path string) string {
	if path == "berth" {
		return "berth"
	}
	rel, ok := strings.CutPrefix(path, "berth/")
	if !ok {
		return ""
	}
	best := ""
	for c := range allowedImports() {
		if (rel == c || strings.HasPrefix(rel, c+"/")) && len(c) > len(best) {
			best = c
		}
	}
	if best == "" {
		return "unknown:" + rel
	}
	return best
}

type listedPackage struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
	Module       *struct{ Path string }
}

func TestImportDirection(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-test=false", "-json", "./...")
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	checked := 0
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		from := component(p.ImportPath)
		if from == "" {
			continue
		}
		checked++
		if strings.HasPrefix(from, "unknown:") {
			t.Errorf("package %s is not in DESIGN.md's layout; add its rule to allowedImports", p.ImportPath)
			continue
		}
		check(t, p.ImportPath, from, p.Imports, allowedImports()[from])
		// Tests build real stores, so they may also reach the lower lines
		// of the direction (rest tests open kv and vfs/chunk), and either
		// metadata engine (agentlink's open two nodes' on one PostgreSQL),
		// never sideways or up.
		check(t, p.ImportPath+" (tests)", from, testOnly(slices.Concat(p.TestImports, p.XTestImports)), append(below(from), "berthtest", "kv/badger", "kv/postgres", "kv/kvtest", "mail/mailtest"))
	}
	if checked < 5 {
		t.Fatalf("checked only %d berth packages; go list output not understood", checked)
	}
}

// below is every component reachable from c through allowedImports.
func below(c string) []string {
	rules := allowedImports()
	seen := map[string]bool{}
	var walk func(string)
	walk = func(c string) {
		for _, d := range rules[c] {
			if !seen[d] {
				seen[d] = true
				walk(d)
			}
		}
	}
	walk(c)
	out := make([]string, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// check reports every import of pkg (in component from) not in allowed,
// and every one forbiddenImports or exclusiveModules rules out.
func check(t *testing.T, pkg, from string, imports, allowed []string) {
	t.Helper()
	for _, v := range violations(from, imports, allowed) {
		t.Errorf("%s %s", pkg, v)
	}
}

// violations is check's verdict: one message per import of a package in
// component from that breaks a rule.
func violations(from string, imports, allowed []string) []string {
	var out []string
	for _, imp := range imports {
		if owner, ok := exclusiveOwner(imp); ok && owner != from {
			out = append(out, fmt.Sprintf("imports %s; only %s may", imp, owner))
		}
		if rule, ok := forbiddenImports()[imp]; ok && (slices.Contains(rule.from, "*") || slices.Contains(rule.from, from)) {
			out = append(out, fmt.Sprintf("imports %s: %s", imp, rule.reason))
		}
		to := component(imp)
		if to == "" || to == from || slices.Contains(allowed, "*") {
			continue
		}
		if to == "berth" || !slices.Contains(allowed, to) {
			out = append(out, fmt.Sprintf("imports %s: %s may import only %v (DESIGN.md)", imp, from, allowed))
		}
	}
	return out
}

// testOnly drops from a test's imports the HTTP packages a domain's test
// may use to drive it (a test of vfs's ranges speaks HTTP; vfs does not).
func testOnly(imports []string) []string {
	return slices.DeleteFunc(slices.Clone(imports), func(imp string) bool {
		return imp == "net/http" || strings.HasPrefix(imp, "net/http/")
	})
}

// exclusiveOwner reports the component that alone may import imp.
func exclusiveOwner(imp string) (string, bool) {
	for mod, owner := range exclusiveModules() {
		if imp == mod || strings.HasPrefix(imp, mod+"/") {
			return owner, true
		}
	}
	return "", false
}

func TestComponent(t *testing.T) {
	for path, want := range map[string]string{
		"berth":                     "berth",
		"berth/vfs":                 "vfs",
		"berth/vfs/chunk":           "vfs/chunk",
		"berth/vfs/chunk/chunktest": "vfs/chunk",
		"berth/kv/badger":           "kv/badger",
		"berth/kv/kvtest":           "kv/kvtest",
		"berth/webdav":              "webdav",
		"berth/web":                 "web",
		"berth/rest":                "rest",
		"net/http":                  "",
		"berthx/foo":                "",
		"berth/nowhere":             "unknown:nowhere",
	} {
		if got := component(path); got != want {
			t.Errorf("component(%q) = %q, want %q", path, got, want)
		}
	}
	if got, want := below("rest"), []string{"account", "activity", "agentlink", "httpserve", "kv", "share", "vfs", "vfs/chunk"}; !slices.Equal(got, want) {
		t.Errorf("below(rest) = %v, want %v", got, want)
	}
}

// TestImportRules checks the rules themselves on made-up imports, so a
// rule that stops matching cannot pass silently.
func TestImportRules(t *testing.T) {
	for _, tc := range []struct {
		from, imp string
		broken    bool
	}{
		{"vfs", "net/http", true},
		{"kv", "net/http", true},
		{"vfs/chunk", "net/http", true},
		{"account", "net/http", true},
		{"config", "net/http", true},
		{"rest", "net/http", false},
		{"webdav", "golang.org/x/net/webdav", false},
		{"rest", "golang.org/x/net/webdav", true},
		{"daemon", "golang.org/x/net/webdav", true},
		{"rest", "github.com/prometheus/client_golang/prometheus/promauto", true},
		{"daemon", "github.com/prometheus/client_golang/prometheus/promauto", true},
		{"vfs", "github.com/prometheus/client_golang/prometheus", false},
		{"vfs", "github.com/dgraph-io/badger/v4", true},
		{"kv", "github.com/dgraph-io/badger/v4", true},
		{"kv/badger", "github.com/dgraph-io/badger/v4", false},
		{"kv/badger", "berth/vfs", true},
		{"vfs", "berth/kv/badger", true},
		{"daemon", "berth/kv/badger", false},
		{"vfs", "berth/rest", true},
		{"rest", "berth/webdav", true},
		{"webdav", "berth/vfs", false},
		{"rest", "berth/berthtest", true},
		{"rest", "berth/httpserve", false},
		{"httpserve", "berth/rest", true},
		{"httpserve", "berth/account", true},
		{"httpserve", "net/http", false},
		{"web", "berth/rest", true},
		{"web", "berth/webdav", true},
		{"web", "berth/share", false},
		{"web", "berth/httpserve", false},
		{"rest", "berth/web", true},
	} {
		got := violations(tc.from, []string{tc.imp}, allowedImports()[tc.from])
		if broken := len(got) > 0; broken != tc.broken {
			t.Errorf("%s importing %s: violations %q, want broken=%v", tc.from, tc.imp, got, tc.broken)
		}
	}
}

// TestFrontEndsTakeOnlyErrorsFromStores keeps the front ends' licence to
// import kv and vfs/chunk to what it is for: the one error table of each
// front end (errors.go) maps their error values; no other file may reach
// the stores below vfs.
func TestFrontEndsTakeOnlyErrorsFromStores(t *testing.T) {
	for _, dir := range []string{"rest", "webdav", "web"} {
		files, _ := filepath.Glob(filepath.Join("..", dir, "*.go"))
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") || filepath.Base(name) == "errors.go" {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				if p := strings.Trim(imp.Path.Value, `"`); p == "berth/kv" || p == "berth/vfs/chunk" {
					t.Errorf("%s imports %s: only the front end's errors.go may, to map its errors", name, p)
				}
			}
		}
	}
}
