//go:build linux && cgo

package cli

import (
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"
	"go.yaml.in/yaml/v3"

	"kernelbox/appliance"
	"kernelbox/appliance/api"
)

// defaultConfigFile is the package's config (packaging/deb), which
// `config check` reads when given no file and KERNELBOX_CONFIG is unset.
const defaultConfigFile = "/etc/kernelbox/config.yaml"

func configCommand() *cli.Command {
	file := func(c *cli.Context) string {
		if c.Args().Len() > 0 {
			return c.Args().First()
		}
		if f := os.Getenv("KERNELBOX_CONFIG"); f != "" {
			return f
		}
		return defaultConfigFile
	}
	return &cli.Command{
		Name:  "config",
		Usage: "check the daemon's config file, or show what it amounts to",
		Subcommands: []*cli.Command{
			{
				Name:      "check",
				Usage:     "check a config file: every unknown key and bad value, with its line (docs/configuration.md lists the keys)",
				ArgsUsage: "[FILE] (default $KERNELBOX_CONFIG, else " + defaultConfigFile + ")",
				Action: func(c *cli.Context) error {
					f := file(c)
					if _, err := loadConfig(f); err != nil {
						return &ExitError{Code: api.ExitFailed, Err: err}
					}
					fmt.Fprintf(c.App.Writer, "%s: ok\n", f)
					return nil
				},
			},
			{
				Name:      "show",
				Usage:     "print the configuration the daemon would run with: the defaults, then the file (none with --defaults)",
				ArgsUsage: "[FILE]",
				Flags:     []cli.Flag{&cli.BoolFlag{Name: "defaults", Usage: "the defaults alone, as a file to start from"}},
				Action: func(c *cli.Context) error {
					cfg := appliance.DefaultConfig()
					if !c.Bool("defaults") {
						var err error
						if cfg, err = loadConfig(file(c)); err != nil {
							return &ExitError{Code: api.ExitFailed, Err: err}
						}
					}
					b, err := yaml.Marshal(cfg)
					if err != nil {
						return fmt.Errorf("config show: %w", err)
					}
					_, err = c.App.Writer.Write(b)
					return err
				},
			},
		},
	}
}

// loadConfig is the file over the defaults, validated as serve would.
func loadConfig(path string) (appliance.Config, error) {
	cfg := appliance.DefaultConfig()
	if err := cfg.LoadConfigFile(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return cfg, fmt.Errorf("config check: no file %s: pass the file to check", path)
		}
		return cfg, err
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("config %s:\n%w", path, err)
	}
	return cfg, nil
}
