package main

// serve's LoRA flags, vLLM's names: --enable-lora, --max-loras, --lora-modules.

import (
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/switchyard-llm/switchyard/internal/server"
)

func loraFlags(c *server.LoRAConfig) []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "enable-lora", Destination: &c.Enable, Category: "requests",
			Usage: "serve LoRA adapters (vLLM's flag; start the engines with it too): a request whose model names an adapter goes to the engines with its LoRARequest, " +
				"/v1/models lists the adapters, and POST /v1/load_lora_adapter and /v1/unload_lora_adapter (admin endpoints) change them",
			Sources: cli.EnvVars("SWITCHYARD_ENABLE_LORA")},
		&cli.IntFlag{Name: "max-loras", Destination: &c.MaxLoRAs, Category: "requests", Value: server.DefaultMaxLoRAs,
			Usage:   "vLLM's flag, which the engines take themselves: here the max_lora label of vllm:lora_requests_info and the built-in mock engines' value",
			Sources: cli.EnvVars("SWITCHYARD_MAX_LORAS")},
		&cli.GenericFlag{Name: "lora-modules", Value: &modulesValue{dst: &c.Modules}, Category: "requests",
			Usage: "an adapter served from the start, sent to every engine with add_lora as it comes up: name=path, or vLLM's JSON form " +
				`{"name": ..., "path": ..., "base_model_name": ...} (several after one flag, as vLLM takes them, or the flag repeated; needs --enable-lora)`,
			Sources: cli.EnvVars("SWITCHYARD_LORA_MODULES")},
	}
}

// modulesValue collects --lora-modules values whole: the JSON form has commas,
// so the values are not split as a string-slice flag's are.
type modulesValue struct{ dst *[]string }

func (m *modulesValue) Set(v string) error {
	*m.dst = append(*m.dst, v)
	return nil
}

func (m *modulesValue) String() string {
	if m == nil || m.dst == nil {
		return ""
	}
	return strings.Join(*m.dst, " ")
}

func (m *modulesValue) Get() any { return *m.dst }

// loraArgs takes vLLM's `--lora-modules a=/p b=/q` form: the values after the
// first one reach serve as positional arguments, and those that are name=path or
// a JSON object are --lora-modules values (a model directory is neither). The
// other arguments are returned.
func loraArgs(args []string, c *server.LoRAConfig) []string {
	rest := args[:0:0]
	for _, a := range args {
		if t := strings.TrimSpace(a); strings.HasPrefix(t, "{") || strings.Contains(t, "=") && !strings.HasPrefix(t, "/") && !strings.HasPrefix(t, ".") {
			c.Modules = append(c.Modules, a)
			continue
		}
		rest = append(rest, a)
	}
	return rest
}
