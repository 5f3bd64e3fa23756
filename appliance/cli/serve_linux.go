//go:build linux && cgo

package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"kernelbox/appliance"
	"kernelbox/appliance/api"
)

func serveCommand() *cli.Command {
	d := appliance.DefaultConfig()
	return &cli.Command{
		Name:  "serve",
		Usage: "run the daemon: the queue, the runner and the API",
		Description: "Flags override the config file, which overrides the defaults. On the first start the\n" +
			"daemon creates the admin user and writes its token to DATA/admin-token (mode 0600).\n" +
			"SIGTERM or SIGINT stops it gracefully; a second signal stops it at once.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Usage: "a YAML config file (see docs/api.md)", EnvVars: []string{"KERNELBOX_CONFIG"}},
			&cli.StringFlag{Name: "data", Usage: "the data directory", Value: d.DataDir},
			&cli.StringFlag{Name: "listen", Usage: "TCP address of the API (\"\" for the socket only)", Value: d.Listen},
			&cli.StringFlag{Name: "socket", Usage: "unix socket for local admin (default DATA/kernelbox.sock; - for none)"},
			&cli.StringFlag{Name: "gpus", Usage: "auto (discover them) or none (the CPU backend only)", Value: d.GPUs},
			&cli.IntFlag{Name: "cpu-slots", Usage: "CPU-backend runs at once (the cpu GPU type)", Value: d.CPUSlots},
			&cli.DurationFlag{Name: "grace", Usage: "how long shutdown waits for running jobs", Value: d.Grace},
			&cli.BoolFlag{Name: "no-sandbox", Usage: "run submissions without the sandbox (development only: they get the daemon's rights)"},
			&cli.BoolFlag{Name: "no-library", Usage: "do not load the bundled problems"},
			&cli.BoolFlag{Name: "accept-store-loss", Usage: "start on a database that lost what this data directory recorded of it (an older backup, a new file); ids handed out before are not reused"},
			&cli.StringFlag{Name: "cgroup-parent", Usage: "the cgroup the sandboxes' cgroups are made under (default: the systemd unit's delegated cgroup, else kernelbox-<hash of the data directory>)", Value: d.CgroupParent},
			&cli.StringFlag{Name: "log-level", Usage: "debug, info, warn or error", Value: d.LogLevel},
			&cli.StringFlag{Name: "log-format", Usage: "text (logfmt) or json (one object a line, for journald)", Value: d.LogFormat},
			pythonFlag(),
		},
		Action: runServe,
	}
}

// serveConfig builds the config: defaults, then the file, then the flags
// that were set.
func serveConfig(c *cli.Context) (appliance.Config, error) {
	cfg := appliance.DefaultConfig()
	if f := c.String("config"); f != "" {
		if err := cfg.LoadConfigFile(f); err != nil {
			return cfg, err
		}
	}
	if c.IsSet("data") || cfg.DataDir == "" {
		cfg.DataDir = c.String("data")
	}
	if abs, err := filepath.Abs(cfg.DataDir); err == nil {
		cfg.DataDir = abs
	}
	if c.IsSet("listen") {
		cfg.Listen = c.String("listen")
	}
	if c.IsSet("socket") {
		cfg.Socket = c.String("socket")
	}
	if c.IsSet("gpus") {
		cfg.GPUs = c.String("gpus")
	}
	if c.IsSet("cpu-slots") {
		cfg.CPUSlots = c.Int("cpu-slots")
	}
	if c.IsSet("grace") {
		cfg.Grace = c.Duration("grace")
	}
	if c.Bool("no-sandbox") {
		cfg.Sandbox = false
	}
	if c.Bool("accept-store-loss") {
		cfg.AcceptStoreLoss = true
	}
	if c.Bool("no-library") {
		cfg.Library = false
	}
	if c.IsSet("cgroup-parent") {
		cfg.CgroupParent = c.String("cgroup-parent")
	}
	if c.IsSet("python") {
		cfg.Python = c.String("python")
	}
	if c.IsSet("log-level") {
		cfg.LogLevel = c.String("log-level")
	}
	if c.IsSet("log-format") {
		cfg.LogFormat = c.String("log-format")
	}
	cfg.Version = version()
	return cfg, cfg.Validate()
}

// newLogger is the daemon's logger: logfmt for a terminal, JSON objects
// for journald and log shippers. The config is validated: both are known.
func newLogger(w io.Writer, level, format string) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func runServe(c *cli.Context) error {
	cfg, err := serveConfig(c)
	if err != nil {
		return usageError("serve: %v", err)
	}
	log := newLogger(c.App.ErrWriter, cfg.LogLevel, cfg.LogFormat)
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	d := appliance.NewDaemon(cfg, log)
	if err := d.Start(ctx); err != nil {
		return &ExitError{Code: api.ExitServer, Err: fmt.Errorf("serve: %w", err)}
	}
	fmt.Fprintf(c.App.Writer, "kernelbox %s serving on %s (data %s)\n", version(), d.Addr(), cfg.DataDir)
	<-ctx.Done()
	stop() // a second signal now ends the process the default way
	log.Info("shutting down", "grace", cfg.Grace)
	shutCtx, cancel := context.WithTimeout(context.Background(), cfg.Grace+10*time.Second)
	defer cancel()
	if err := d.Stop(shutCtx); err != nil {
		return &ExitError{Code: api.ExitServer, Err: fmt.Errorf("serve: %w", err)}
	}
	log.Info("stopped")
	return nil
}
