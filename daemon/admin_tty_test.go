package daemon

import (
	"bufio"
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal: the controlling side, where the test
// types, and the terminal the command reads.
func openPTY(t *testing.T) (ctl, tty *os.File) {
	t.Helper()
	// Non-blocking, so the poller takes it and read deadlines work.
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	ctl = os.NewFile(uintptr(fd), "ptmx")
	t.Cleanup(func() { ctl.Close() })
	n, err := unix.IoctlGetInt(int(ctl.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Skipf("TIOCGPTN: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(ctl.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Skipf("unlocking the pseudo-terminal: %v", err)
	}
	tty, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("opening the pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { tty.Close() })
	return ctl, tty
}

// typeSilently types s once the terminal has stopped echoing: the line
// discipline echoes what is typed as it arrives, so typing earlier would
// echo whatever the command does.
func typeSilently(t *testing.T, ctl, tty *os.File, s string) (typed <-chan struct{}) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		typeWhenSilent(t, ctl, tty, s)
	}()
	return done
}

func typeWhenSilent(t *testing.T, ctl, tty *os.File, s string) {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		tio, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
		if err == nil && tio.Lflag&unix.ECHO == 0 {
			ctl.WriteString(s)
			return
		}
	}
	t.Error("the terminal never stopped echoing")
}

// TestAdminPasswordPrompt: a password typed on the terminal is read
// without echo, twice for a new one, and the terminal keeps its echo
// after, also when the prompt is interrupted.
func TestAdminPasswordPrompt(t *testing.T) {
	ctl, tty := openPTY(t)
	var errw strings.Builder
	a := &adminCLI{io: adminIO{in: tty, out: &errw, errw: &errw, getenv: func(string) string { return "" }}}

	typed := typeSilently(t, ctl, tty, "s3cret pass\ns3cret pass\n")
	pw, err := a.newPassword(context.Background())
	<-typed
	if err != nil || pw != "s3cret pass" {
		t.Fatalf("newPassword: %q, %v", pw, err)
	}
	// What the terminal echoed reaches the controlling side; with echo
	// off, nothing of the password does.
	ctl.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	echoed, _ := bufio.NewReader(ctl).ReadString(0)
	if strings.Contains(echoed, "s3cret") {
		t.Errorf("the password was echoed: %q", echoed)
	}
	if !strings.Contains(errw.String(), "New password: ") || !strings.Contains(errw.String(), "Again: ") {
		t.Errorf("prompts: %q", errw.String())
	}

	typed = typeSilently(t, ctl, tty, "one\ntwo\n")
	if _, err := a.newPassword(context.Background()); exitCode(err) != exitUsage {
		t.Errorf("two different passwords: %v", err)
	}
	<-typed

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := a.readSecret(ctx, "Password: "); err != context.Canceled {
		t.Errorf("an interrupted prompt: %v", err)
	}
	tio, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil || tio.Lflag&unix.ECHO == 0 {
		t.Errorf("after an interrupted prompt the terminal echoes no more (%v)", err)
	}
}
