package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"berth/agent"
)

// Environment variables `berth agent` reads its secrets from, so that
// they never appear in a process listing or a unit file.
const (
	agentPasswordEnv = "BERTH_AGENT_PASSWORD"
	agentCodeEnv     = "BERTH_AGENT_AUTH_CODE"
)

// newAgentCommand builds `berth agent`: the machine side, run on a
// computer that berth backs up or serves folders from (docs/agent.md).
func newAgentCommand(stderr io.Writer) *cobra.Command {
	var server, login, stateFile, caFile, passwordFile, level string
	var backupInterval time.Duration
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the machine agent: backups, restores and mapped folders of this computer",
		Long: "berth agent signs this computer in to a berth server as a machine and keeps one\n" +
			"HTTPS connection to it, through which the server sends its commands.\n" +
			"The password comes from --password-file or $" + agentPasswordEnv + " (needed only\n" +
			"until the first sign-in, and again if the session ends); a two-step code from $" + agentCodeEnv + ".",
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			// The server's flags are persistent on the root, so cobra
			// takes them here too; the agent reads none, and one given
			// (--data, --config) would be silently ignored.
			var given []string
			cmd.InheritedFlags().VisitAll(func(f *pflag.Flag) {
				if f.Changed {
					given = append(given, "--"+f.Name)
				}
			})
			if len(given) > 0 {
				return fmt.Errorf("berth agent does not read the server's flags (%s): see berth agent --help", strings.Join(given, ", "))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			var lv slog.Level
			if err := lv.UnmarshalText([]byte(level)); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lv}))
			if stateFile == "" {
				stateFile = defaultAgentState()
			}
			cfg := agent.Config{
				Server: server, Login: login, StateFile: stateFile, CAFile: caFile, Logger: log,
				BackupInterval: backupInterval,
				Password: func() (string, error) {
					if passwordFile != "" {
						b, err := os.ReadFile(passwordFile)
						if err != nil {
							return "", fmt.Errorf("--password-file: %w", err)
						}
						return strings.TrimRight(string(b), "\r\n"), nil
					}
					if pw := os.Getenv(agentPasswordEnv); pw != "" {
						return pw, nil
					}
					return "", fmt.Errorf("%w: set --password-file or $%s", agent.ErrSignIn, agentPasswordEnv)
				},
				TwoStepCode: func(context.Context) (string, error) {
					if c := os.Getenv(agentCodeEnv); c != "" {
						return c, nil
					}
					return "", fmt.Errorf("%w: a two-step code is required: set $%s", agent.ErrSignIn, agentCodeEnv)
				},
			}
			a, err := agent.Start(cfg)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			err = a.Run(ctx)
			if errors.Is(err, context.Canceled) {
				return nil
			}
			if errors.Is(err, agent.ErrSignIn) {
				// Exit status 3, which the unit files name in
				// RestartPreventExitStatus: restarting cannot mend a
				// refused password or a missing two-step code.
				return noAccess(err)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&server, "server", "", "the server's URL, https://host:port (required)")
	f.StringVar(&login, "login", "", "the person this machine signs in as (required)")
	f.StringVar(&stateFile, "state-file", "", "where the machine's identity and session are kept (default $STATE_DIRECTORY or ~/.local/state/berth-agent, state.json)")
	f.StringVar(&caFile, "ca-file", "", "PEM certificates to trust for the server (its self-signed certificate)")
	f.StringVar(&passwordFile, "password-file", "", "a file holding the person's password (not a device password: those serve WebDAV only)")
	f.StringVar(&level, "log-level", "info", "debug, info, warn or error")
	f.DurationVar(&backupInterval, "backup-interval", agent.DefaultBackupInterval, "the time between two runs of each backup (docs/agent.md \"Backups\")")
	_ = cmd.MarkFlagRequired("server")
	_ = cmd.MarkFlagRequired("login")
	// The server's flags are persistent on the root, so cobra would list
	// all of them here too, where the agent reads none.
	cmd.SetUsageTemplate(agentUsage)
	return cmd
}

// agentUsage is cobra's usage template without the global flags: the
// agent's own are all it reads.
const agentUsage = `Usage:
  {{.UseLine}}{{if .HasAvailableLocalFlags}}

Flags:
{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}
`

// defaultAgentState is systemd's StateDirectory when run as a service,
// else the user's state folder.
func defaultAgentState() string {
	if d := os.Getenv("STATE_DIRECTORY"); d != "" {
		return filepath.Join(strings.Split(d, ":")[0], "state.json")
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "berth-agent", "state.json")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".local", "state", "berth-agent", "state.json")
}
