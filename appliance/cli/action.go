package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"kernelbox/appliance/api"
)

// clientConfig is what `kernelbox login` stores.
type clientConfig struct {
	Server string `json:"server"`
	Token  string `json:"token"`
}

// clientConfigPath is ~/.config/kernelbox/config.json unless
// --client-config (KERNELBOX_CLIENT_CONFIG) says otherwise.
func clientConfigPath(c *cli.Context) (string, error) {
	if p := c.String("client-config"); p != "" {
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("find the config directory: %w", err)
	}
	return filepath.Join(dir, "kernelbox", "config.json"), nil
}

func readClientConfig(c *cli.Context) clientConfig {
	var cc clientConfig
	p, err := clientConfigPath(c)
	if err != nil {
		return cc
	}
	if data, err := os.ReadFile(p); err == nil {
		_ = json.Unmarshal(data, &cc)
	}
	return cc
}

func writeClientConfig(c *cli.Context, cc clientConfig) (string, error) {
	p, err := clientConfigPath(c)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return "", err
	}
	data, _ := json.MarshalIndent(cc, "", "  ")
	// 0600: the file holds a token.
	return p, os.WriteFile(p, append(data, '\n'), 0o600)
}

// clientFlags go on every command that talks to the daemon.
func clientFlags(extra ...cli.Flag) []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "server", Usage: "the kernelbox server: http://HOST:PORT or unix:/path/to/kernelbox.sock", EnvVars: []string{"KERNELBOX_SERVER"}},
		&cli.StringFlag{Name: "token", Usage: "your API token", EnvVars: []string{"KERNELBOX_TOKEN"}},
		&cli.StringFlag{Name: "client-config", Usage: "the login file (default ~/.config/kernelbox/config.json)", EnvVars: []string{"KERNELBOX_CLIENT_CONFIG"}},
	}, extra...)
}

// jsonFlag() and the other shared flags are made fresh for each command:
// urfave/cli writes into a flag when it parses it, so one flag value must
// not serve two apps (the tests run many at once).
func jsonFlag() cli.Flag { return &cli.BoolFlag{Name: "json", Usage: "print JSON instead of a table"} }

// client builds the API client from flags, environment and the login file.
func client(c *cli.Context) (*api.Client, error) {
	cc := readClientConfig(c)
	server, token := c.String("server"), c.String("token")
	if server == "" {
		server = cc.Server
	}
	if token == "" && (c.String("server") == "" || c.String("server") == cc.Server) {
		token = cc.Token
	}
	cl, err := api.NewClient(server, token)
	if err != nil {
		return nil, clientError(err)
	}
	return cl, nil
}

// clientError turns an API error into the exit status its code calls for.
func clientError(err error) error {
	if err == nil {
		return nil
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return err
	}
	var ae *api.Error
	if !errors.As(err, &ae) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		// Not the server's answer: this machine's own failure (writing
		// the output, say), a usage-class error as before the helper.
		return &ExitError{Code: api.ExitUsage, Err: err}
	}
	return &ExitError{Code: api.ExitStatus(api.ErrorCode(err)), Err: err}
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// clientFunc is the body of a command that talks to the daemon.
type clientFunc func(c *cli.Context, cl *api.Client) error

// clientAction is the one shape of a command that talks to the daemon:
// the API client is built from the flags, the environment and the login
// file, and the API errors fn returns become the exit status their code
// calls for.
func clientAction(fn clientFunc) cli.ActionFunc {
	return func(c *cli.Context) error {
		cl, err := client(c)
		if err != nil {
			return err
		}
		return clientError(fn(c, cl))
	}
}

// argAction is clientAction for a command of one argument, which is
// checked before anything else: a usage error comes first.
func argAction(what string, fn func(c *cli.Context, cl *api.Client, arg string) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		if c.NArg() != 1 {
			return usageError("%s: give one %s", c.Command.FullName(), what)
		}
		return clientAction(func(c *cli.Context, cl *api.Client) error { return fn(c, cl, c.Args().First()) })(c)
	}
}

// idAction is argAction for a submission id.
func idAction(fn func(c *cli.Context, cl *api.Client, id int64) error) cli.ActionFunc {
	return argAction("submission ID", func(c *cli.Context, cl *api.Client, arg string) error {
		id, err := strconv.ParseInt(arg, 10, 64)
		if err != nil || id <= 0 {
			return usageError("%s: %q is not a submission id", c.Command.FullName(), arg)
		}
		return fn(c, cl, id)
	})
}

// output prints v as JSON under --json, and otherwise the table.
func output(c *cli.Context, v any, table func(w io.Writer) error) error {
	if c.Bool("json") {
		return printJSON(c.App.Writer, v)
	}
	return table(c.App.Writer)
}

// newTable is the tabwriter every table is printed with.
func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) }

func deadlineText(t time.Time) string {
	if t.IsZero() {
		return "none"
	}
	return t.UTC().Format("2006-01-02 15:04Z")
}
