package main

import (
	"context"

	"github.com/urfave/cli/v3"

	"github.com/switchyard-llm/switchyard/internal/mockengine"
)

// withMockScript adds a flag naming a mock-engine script file (see
// mockengine.Script) to cmd: serve's built-in mock engines and the
// mock-engine command then answer the prompts its rules trigger on with the
// rules' tokens. The script is loaded before cmd's action runs and reaches
// the engines through mockengine.DefaultConfig, which their configs start
// from.
func withMockScript(cmd *cli.Command, name, category string) *cli.Command {
	var path string
	cmd.Flags = append(cmd.Flags, &cli.StringFlag{Name: name, Destination: &path, Category: category,
		Usage: "a JSON file of scripted answers for tests: {\"rules\": [{\"trigger\": [IDS], \"tokens\": [IDS], \"finish\": \"stop\"|\"length\"}]}: " +
			"a prompt holding a rule's trigger token ids in a row is answered with its tokens (then EOS for stop); empty = none"})
	action := cmd.Action
	cmd.Action = func(ctx context.Context, c *cli.Command) error {
		if path != "" {
			s, err := mockengine.LoadScript(path)
			if err != nil {
				return err
			}
			mockengine.SetDefaultScript(s)
		}
		return action(ctx, c)
	}
	return cmd
}
