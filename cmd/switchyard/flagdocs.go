package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/urfave/cli/v3"
)

//go:generate go run . docs flags --output ../../docs/flags.md

// The flag reference (docs/flags.md) is generated from the flag definitions, so
// a flag's name, variable, default and usage are written once; a test fails
// when the file and the definitions disagree.
func docsCommand() *cli.Command {
	var output string
	return &cli.Command{
		Name:   "docs",
		Usage:  "write generated documentation",
		Hidden: true,
		Commands: []*cli.Command{{
			Name:  "flags",
			Usage: "write the flag reference of every command (docs/flags.md)",
			Flags: []cli.Flag{&cli.StringFlag{Name: "output", Destination: &output,
				Usage: "write to this file instead of stdout"}},
			Action: func(_ context.Context, cmd *cli.Command) error {
				if output == "" {
					return writeFlagDocs(cmd.Root().Writer)
				}
				var b strings.Builder
				if err := writeFlagDocs(&b); err != nil {
					return err
				}
				return os.WriteFile(output, []byte(b.String()), 0o644)
			},
		}},
	}
}

// writeFlagDocs writes the reference: one table per command that has flags.
func writeFlagDocs(w io.Writer) error {
	var b strings.Builder
	b.WriteString("# Flag reference\n\n" +
		"Generated from the flag definitions by `go generate ./cmd/switchyard`\n" +
		"(`go run ./cmd/switchyard docs flags --output docs/flags.md`); do not edit by hand.\n" +
		"Every flag with a variable can be set in the environment instead; a flag given on\n" +
		"the command line wins. The flags of `switchyard` itself go before the command.\n")
	writeCommandFlags(&b, rootCommand(), "")
	_, err := io.WriteString(w, b.String())
	return err
}

func writeCommandFlags(b *strings.Builder, cmd *cli.Command, parent string) {
	path := strings.TrimSpace(parent + " " + cmd.Name)
	if len(cmd.Flags) > 0 {
		fmt.Fprintf(b, "\n## %s\n\n%s.\n\n", path, cmd.Usage)
		b.WriteString("| Flag | Environment | Default | Category | Usage |\n|---|---|---|---|---|\n")
		for _, f := range flagsByCategory(cmd.Flags) {
			b.WriteString(flagRow(f))
		}
	}
	for _, sub := range cmd.Commands {
		if !sub.Hidden {
			writeCommandFlags(b, sub, path)
		}
	}
}

// flagsByCategory keeps the definition order within a category, and the
// categories in the order they first appear.
func flagsByCategory(flags []cli.Flag) []cli.Flag {
	var order []string
	byCat := map[string][]cli.Flag{}
	for _, f := range flags {
		c := category(f)
		if _, ok := byCat[c]; !ok {
			order = append(order, c)
		}
		byCat[c] = append(byCat[c], f)
	}
	var out []cli.Flag
	for _, c := range order {
		out = append(out, byCat[c]...)
	}
	return out
}

func category(f cli.Flag) string {
	if c, ok := f.(cli.CategorizableFlag); ok {
		return c.GetCategory()
	}
	return ""
}

func flagRow(f cli.Flag) string {
	var names []string
	for _, n := range f.Names() {
		names = append(names, "`--"+n+"`")
	}
	var env, def, usage string
	if d, ok := f.(cli.DocGenerationFlag); ok {
		if vs := d.GetEnvVars(); len(vs) > 0 {
			env = "`" + strings.Join(vs, "`, `") + "`"
		}
		def = d.GetDefaultText()
		if def == "" {
			def = d.GetValue()
		}
		if u, err := strconv.Unquote(def); err == nil {
			def = u // a string flag's default is shown quoted
		}
		if def == "" && !d.TakesValue() {
			def = "false" // a bool flag
		}
		usage = d.GetUsage()
	}
	if def != "" {
		def = "`" + def + "`"
	}
	cell := func(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ") }
	return fmt.Sprintf("| %s | %s | %s | %s | %s |\n", strings.Join(names, ", "), cell(env), cell(def), cell(category(f)), cell(usage))
}
