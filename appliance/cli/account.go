package cli

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"kernelbox/appliance/api"
)

// accountCommands are how a contestant gets onto the box.
func accountCommands() []*cli.Command {
	return []*cli.Command{
		{
			Name:  "login",
			Usage: "store the server and your token in ~/.config/kernelbox",
			Flags: clientFlags(),
			Action: func(c *cli.Context) error {
				if c.String("server") == "" || c.String("token") == "" {
					return usageError("login: give --server URL and --token T")
				}
				return clientAction(func(c *cli.Context, cl *api.Client) error {
					u, err := cl.Me(c.Context)
					if err != nil {
						return err
					}
					p, err := writeClientConfig(c, clientConfig{Server: c.String("server"), Token: c.String("token")})
					if err != nil {
						return &ExitError{Code: api.ExitUsage, Err: err}
					}
					fmt.Fprintf(c.App.Writer, "logged in to %s as %s (%s); saved in %s\n", c.String("server"), u.Name, u.Role, p)
					return nil
				})(c)
			},
		},
		{
			Name:  "register",
			Usage: "create your account with an invite code and log in",
			Flags: clientFlags(
				&cli.StringFlag{Name: "invite", Required: true, Usage: "the invite code an organiser gave you"},
				&cli.StringFlag{Name: "name", Required: true, Usage: "your user name (letters, digits, - _ .)"},
			),
			Action: clientAction(func(c *cli.Context, cl *api.Client) error {
				cr, err := cl.Register(c.Context, c.String("invite"), c.String("name"))
				if err != nil {
					return err
				}
				server := c.String("server")
				if server == "" {
					server = readClientConfig(c).Server
				}
				p, err := writeClientConfig(c, clientConfig{Server: server, Token: cr.Token})
				if err != nil {
					return &ExitError{Code: api.ExitUsage, Err: err}
				}
				fmt.Fprintf(c.App.Writer, "registered %s (%s); token saved in %s\n", cr.User.Name, cr.User.Role, p)
				return nil
			}),
		},
		{
			Name:      "join",
			Usage:     "join closed leaderboards with an invite code",
			ArgsUsage: "CODE",
			Flags:     clientFlags(),
			Action: argAction("invite CODE", func(c *cli.Context, cl *api.Client, code string) error {
				names, err := cl.Join(c.Context, code)
				if err != nil {
					return err
				}
				fmt.Fprintf(c.App.Writer, "joined: %s\n", strings.Join(names, ", "))
				return nil
			}),
		},
	}
}
