package berthtest

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// ModuleRoot is the directory of berth's go.mod, found from this file's
// own path so a test finds it whatever package it runs in.
func ModuleRoot(tb testing.TB) string {
	tb.Helper()
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		tb.Fatal("berthtest: cannot find its own source to locate the module")
	}
	return filepath.Dir(filepath.Dir(self))
}

// BuildBerth compiles the real berth binary into a temporary directory
// and returns its path: what the daemon's tests and the benchmarks run.
func BuildBerth(tb testing.TB) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), "berth")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = ModuleRoot(tb)
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
