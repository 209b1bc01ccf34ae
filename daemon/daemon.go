// Package daemon is the berth process: the command line, the wiring of
// every package, the listeners, TLS, signals, systemd notification and
// graceful shutdown. It is the only package that wires, exits or handles
// signals.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"berth/config"
	"berth/rest"
)

// Main runs the berth command line with args (os.Args) and returns the
// process exit code.
func Main(args []string) int {
	// GOGC stays at Go's default (100). It was 25, because Badger's
	// memtable arenas count as live heap and garbage grew to their size
	// again between collections (190 MiB resident for a large download).
	// The soft memory limit derived from the settings (applyMemoryLimit)
	// now bounds that: with GOGC=100 peak RSS in bench/webdav.sh was
	// 85.1 MiB. At 25, a 4 KiB GET's 12 MB live heap (10.6 MB of them
	// arenas) was collected every 3 MB of garbage, about every 830
	// requests, and collection was some 5% of the server's CPU per
	// request against 2% for the bare Go server; at 100, every 3,500.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(args) > 0 {
		args = args[1:]
	}
	if err := run(ctx, args, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "berth:", err)
		return exitCode(err)
	}
	return 0
}

// errFsckProblems is returned when fsck found damage; its report has
// already been printed.
var errFsckProblems = errors.New("fsck found problems")

// run executes one command; ctx is cancelled by SIGINT or SIGTERM.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := newRootCommand(stdout, stderr)
	root.SetArgs(args)
	return root.ExecuteContext(ctx)
}

// newRootCommand builds the cobra tree: serve (the default), fsck, gc,
// purge-deleted, reset-password, version, admin. The configuration flags are persistent, so every subcommand
// reads the same data directory the same way.
func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "berth",
		Short:         "berth is a file storage, sync and sharing daemon",
		Long:          "berth serves files over HTTPS (REST API and WebDAV).\nWithout a subcommand it runs serve.",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	config.RegisterFlags(root.PersistentFlags())

	serve := &cobra.Command{
		Use:   "serve",
		Short: "Run the daemon (the default)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, log, err := setup(cmd, stderr)
			if err != nil {
				return err
			}
			return serve(cmd.Context(), cfg, log, stderr)
		},
	}
	root.RunE = serve.RunE

	var verify bool
	fsck := &cobra.Command{
		Use:   "fsck",
		Short: "Check a stopped data directory for missing or leaked chunks",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, log, err := setup(cmd, stderr)
			if err != nil {
				return err
			}
			return fsckCommand(cmd.Context(), cfg, log, stdout, verify)
		},
	}
	fsck.Flags().BoolVar(&verify, "verify", false, "also read every chunk and check its hash")

	gc := &cobra.Command{
		Use:   "gc",
		Short: "Remove unreferenced chunks from a stopped data directory",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, log, err := setup(cmd, stderr)
			if err != nil {
				return err
			}
			return gcCommand(cmd.Context(), cfg, log, stdout)
		},
	}

	var olderThan time.Duration
	purge := &cobra.Command{
		Use:   "purge-deleted",
		Short: "Purge items deleted longer ago than --older-than from a stopped data directory, then collect garbage",
		Long: "Deleted files and folders keep their space until purged. purge-deleted removes\n" +
			"for good every item deleted more than --older-than ago, in every root, then\n" +
			"removes the chunks nothing references any more, and prints what it did.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("older-than") {
				return errors.New("purge-deleted: --older-than is required (for example 720h; 0s purges everything deleted)")
			}
			if olderThan < 0 {
				return fmt.Errorf("purge-deleted: --older-than %v is negative", olderThan)
			}
			cfg, log, err := setup(cmd, stderr)
			if err != nil {
				return err
			}
			return purgeCommand(cmd.Context(), cfg, log, stdout, olderThan)
		},
	}
	purge.Flags().DurationVar(&olderThan, "older-than", 0, "purge items deleted longer ago than this (720h: 30 days)")

	reset := &cobra.Command{
		Use:   "reset-password LOGIN",
		Short: "Give a person of a stopped data directory a new password, unlocked, with every session ended",
		Long: "reset-password is the way back into a lost account, the administrator's too. It\n" +
			"sets a new password for the person whose username or e-mail address is LOGIN,\n" +
			"clears the login's lockout (failed attempts and lock) and ends the person's\n" +
			"sessions. The password is random and printed once on standard error, or taken\n" +
			"from " + resetPasswordEnv + " (never a flag: ps would show it). berth must be\n" +
			"stopped: a running berth holds the data directory.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, log, err := setup(cmd, stderr)
			if err != nil {
				return err
			}
			return resetPasswordCommand(cmd.Context(), cfg, log, stderr, args[0], os.Getenv(resetPasswordEnv))
		},
	}

	version := &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(stdout, "berth %s (API %s)\n", buildVersion(), rest.APIVersion)
			return err
		},
	}

	var mo migrateOptions
	migrate := &cobra.Command{
		Use:   "migrate --to-config FILE",
		Short: "Copy a stopped single-node data directory into PostgreSQL and S3, and verify the copy",
		Long: "migrate copies the metadata (Badger) and the chunks (on disk) of the stopped data\n" +
			"directory --data into the PostgreSQL database and the S3 bucket that the\n" +
			"configuration file --to-config names (metadata.backend postgres, storage.backend\n" +
			"s3: the file the nodes will run with), then verifies it: every key equal, every\n" +
			"chunk present and hashing to its id, fsck of the target. It refuses a target that\n" +
			"holds anything unless --resume (go on after an interruption) or --force.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, log, err := setup(cmd, stderr)
			if err != nil {
				return err
			}
			return migrateCommand(cmd.Context(), cfg, log, stdout, mo)
		},
	}
	migrate.Flags().StringVar(&mo.toConfig, "to-config", "", "the target's configuration file (metadata.backend postgres, storage.backend s3)")
	migrate.Flags().BoolVar(&mo.resume, "resume", false, "go on with an interrupted migration into the same target")
	migrate.Flags().BoolVar(&mo.force, "force", false, "copy into a target that already holds keys or chunks")
	migrate.Flags().IntVar(&mo.workers, "workers", 16, "chunks copied or verified at once")
	migrate.Flags().IntVar(&mo.batchKeys, "batch-keys", 1000, "keys written in one transaction")
	root.AddCommand(migrate)

	admin := newAdminCommand(adminIO{in: os.Stdin, out: stdout, errw: stderr, getenv: os.Getenv})
	root.AddCommand(serve, fsck, gc, purge, reset, version, admin, newAgentCommand(stderr))
	return root
}

// setup loads the configuration from cmd's flags and builds the logger.
func setup(cmd *cobra.Command, stderr io.Writer) (config.Config, *slog.Logger, error) {
	cfg, err := config.Load(cmd.Flags())
	if err != nil {
		return config.Config{}, nil, err
	}
	return cfg, newLogger(cfg.Log, stderr), nil
}

// newLogger builds the process logger. Text is the default, meant for a
// terminal and for journald, which timestamps lines itself; json suits log
// shippers.
func newLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	// Validate has checked the name; UnmarshalText knows all four.
	_ = level.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// buildVersion is the module version or VCS revision the binary was built
// from, for `berth version` and the log.
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			return "dev-" + s.Value[:12]
		}
	}
	return "dev"
}
