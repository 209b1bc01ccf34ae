package webdav_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// needTool returns the path of an interop client, skipping the test when
// it is missing, unless BERTH_INTEROP=required (as in CI) makes that a failure.
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("BERTH_INTEROP") == "required" {
			t.Fatalf("%s is not installed and BERTH_INTEROP=required (apt-get install %s)", name, name)
		}
		t.Skipf("%s is not installed; skipping (apt-get install %s, or set BERTH_INTEROP=required to fail instead)", name, name)
	}
	return p
}

// TestLitmus runs litmus's five suites against a real berth over HTTPS
// (neon accepts the test server's certificate), then the http suite again
// over plain HTTP, because litmus skips its Expect: 100-continue test on
// TLS servers. Failures and warnings both fail the test: docs/webdav.md
// promises none.
func TestLitmus(t *testing.T) {
	bin := needTool(t, "litmus")
	run := func(f *fixture, suites string) {
		t.Helper()
		cmd := exec.Command(bin, "-k", f.url("/"), "alice", password)
		cmd.Env = append(os.Environ(), "TESTS="+suites)
		out, err := cmd.CombinedOutput()
		t.Logf("litmus %s (%s):\n%s", suites, f.srv.URL, out)
		if err != nil {
			t.Fatalf("litmus: %v", err)
		}
		if strings.Contains(string(out), "FAIL") || strings.Contains(string(out), "WARNING") {
			t.Fatal("litmus reported failures or warnings")
		}
	}
	run(newFixture(t), "basic copymove props locks http")
	run(newFixtureWith(t, fixtureOptions{PlainHTTP: true}), "http")
}
