package daemon

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const unitFile = "../systemd/berth.service"

// TestUnitVerifies runs systemd-analyze verify on berth.service. verify
// insists that ExecStart's binary exists, so the test points it at a stand-in
// in a temporary directory. Warnings (an unknown or misspelt directive) fail
// the test too: verify itself only fails on hard errors.
func TestUnitVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed (apt-get install systemd); skipping the unit check")
	}
	unit, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "berth")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(unit, []byte("/usr/local/bin/berth")) {
		t.Fatal("ExecStart no longer names /usr/local/bin/berth; update this test")
	}
	path := filepath.Join(dir, "berth.service")
	if err := os.WriteFile(path, bytes.ReplaceAll(unit, []byte("/usr/local/bin/berth"), []byte(bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(analyze, "verify", "--man=no", path)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	// Outside a booted systemd (containers) verify may complain about the
	// environment, not the unit; only lines naming our file count.
	var problems []string
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, "berth.service") {
			problems = append(problems, line)
		}
	}
	if err != nil || len(problems) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out.String())
	}
}

// TestUnitEssentials pins the settings the daemon's behaviour relies on.
func TestUnitEssentials(t *testing.T) {
	unit, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Type=notify", "NotifyAccess=main", "WatchdogSec=", "User=berth", "StateDirectory=berth",
		"ExecStart=/usr/local/bin/berth serve --config /etc/berth/berth.yaml --data /var/lib/berth",
		"Restart=on-failure", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes",
		"NoNewPrivileges=yes", "PrivateDevices=yes", "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX",
		"LimitNOFILE=",
	} {
		if !bytes.Contains(unit, []byte("\n"+want)) {
			t.Errorf("berth.service lacks %q", want)
		}
	}
	for _, f := range []string{"../systemd/berth.sysusers", "../systemd/berth.tmpfiles", "../systemd/berth.yaml"} {
		if _, err := os.Stat(f); err != nil {
			t.Error(err)
		}
	}
}
