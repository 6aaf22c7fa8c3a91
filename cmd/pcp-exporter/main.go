// Command pcp-exporter bridges Performance Co-Pilot data (live MMV files and
// archives) to Prometheus and OpenTelemetry. This package only wires flags to
// the packages that do the work; each subcommand lives in its own file, and
// commands lists them.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/version"
)

// command is a subcommand: setup declares its flags on the kingpin command and
// returns the function that runs it once the flags are parsed.
type command struct {
	name, help string
	isDefault  bool
	setup      func(cmd *kingpin.CmdClause) func() error
}

// commands returns the subcommands, in the order help lists them.
func commands() []command {
	return []command{backfillCommand(), dumpCommand(), fetchCommand(), infoCommand(), mappingCommand(), replayCommand(), serveCommand()}
}

// usageError marks an error as bad usage (exit status 2).
type usageError struct{ error }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

func main() {
	os.Exit(run(os.Args[1:]))
}

// nameFlag adds the flag and its value to an error of kingpin's that
// quotes only the value (a number, duration or enum that does not parse).
func nameFlag(app *kingpin.Application, args []string, err error) error {
	ctx, perr := app.ParseContext(args)
	if perr != nil {
		return err
	}
	for _, el := range ctx.Elements {
		f, ok := el.Clause.(*kingpin.FlagClause)
		if ok && el.Value != nil && *el.Value != "" && strings.Contains(err.Error(), *el.Value) {
			return fmt.Errorf("--%s=%s: %w", f.Model().Name, clip(*el.Value), err)
		}
	}
	return err
}

func run(args []string) int {
	app := kingpin.New("pcp-exporter", "Bridge Performance Co-Pilot (PCP) MMV files and archives to Prometheus and OpenTelemetry.")
	// kingpin's Version, with the text made only when asked for (it runs a
	// template: a cost on every start otherwise)
	app.VersionFlag = app.Flag("version", "Show application version.").PreAction(func(*kingpin.ParseContext) error {
		fmt.Fprintln(os.Stdout, version.Print("pcp-exporter"))
		os.Exit(0)
		return nil
	})
	app.VersionFlag.Bool()
	app.HelpFlag.Short('h')
	app.UsageWriter(os.Stdout)
	app.ErrorWriter(os.Stderr)
	runners := map[string]func() error{}
	for _, c := range commands() {
		cc := app.Command(c.name, c.help)
		if c.isDefault {
			cc = cc.Default()
		}
		runners[cc.FullCommand()] = c.setup(cc)
	}
	args, metricAfterPMCD = pmcdArgs(args)
	selected, err := app.Parse(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "pcp-exporter: %v\n", nameFlag(app, args, err))
		return 2
	}
	if err := runners[selected](); err != nil {
		fmt.Fprintf(os.Stderr, "pcp-exporter %s: %v\n", selected, err)
		var ue usageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}
