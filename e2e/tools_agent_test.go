package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/mockengine"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/internal/tokenizer"
)

// agentFamily is one tool parser family in the SDK agent loop: the scenario
// of toolScenarios whose answer is the call, and what the model writes once
// it has the tool's result.
type agentFamily struct {
	call  string   // a toolScenarios name
	final string   // the final answer as the model writes it
	flags []string // serve flags beyond the parser's
}

// agentFinal is the final answer's content every family must return.
const agentFinal = "It is sunny in Paris, 21 degrees."

// agentFamilies are the parser families whose tokenizers CI caches. The
// cached llama3_1 files carry the plain Llama 3 template, which renders the
// tool result as a "tool" turn like any other; gpt-oss's carry none, so its
// family uses the small harmony template of TestToolCallsParsed, which renders
// the tool turn the same way.
var agentFamilies = []agentFamily{
	{call: "hermes", final: agentFinal},
	{call: "qwen3_coder", final: agentFinal},
	{call: "llama3_json", final: agentFinal},
	{call: "pythonic", final: agentFinal},
	{call: "deepseek_v3", final: agentFinal},
	{call: "deepseek_v31", final: agentFinal},
	{call: "gpt-oss", final: "<|channel|>final<|message|>" + agentFinal, flags: []string{"--tokens-per-step", "1"}},
}

func scenarioNamed(t *testing.T, name string) toolScenario {
	t.Helper()
	for _, sc := range toolScenarios {
		if sc.name == name {
			return sc
		}
	}
	t.Fatalf("no scenario %q", name)
	return toolScenario{}
}

// agentScript writes the family's script: the final answer's rule first,
// triggered by the tool result's word, which only the second prompt holds.
func agentScript(t *testing.T, tok *tokenizer.Tokenizer, call toolScenario, final, result string) string {
	t.Helper()
	trigger := tok.Encode(" zqxsunny", false)
	if !containsIDs(tok.Encode(result, false), trigger) {
		t.Fatalf("the tool result's trigger is not in its tokens")
	}
	finalRule := mockengine.ScriptRule{Trigger: trigger, Tokens: tok.Encode(final, false), Finish: "stop"}
	script := mockengine.Script{Rules: []mockengine.ScriptRule{finalRule, scenarioRule(t, tok, call)}}
	b, err := json.Marshal(script)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "agent-script.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestToolsAgentLoopOpenAISDK is an agent loop through the official openai
// SDK for each parser family, against the model's real tokenizer and chat
// template: the model calls get_weather (whole and streamed), the SDK sends
// the assistant's call and the tool's result back, rendered by the template,
// and the model answers. One serve process per family.
func TestToolsAgentLoopOpenAISDK(t *testing.T) {
	node, module := openaiModule(t)
	for _, fam := range agentFamilies {
		t.Run(fam.call, func(t *testing.T) {
			call := scenarioNamed(t, fam.call)
			dir := modelDir(t, call.model)
			tok, err := tokenizer.LoadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			result := "Weather: zqxsunny, 21 degrees."
			args := []string{"--tokenizer", dir, "--mock-engines", "1", "--tokens-per-step", "3",
				"--mock-engine-script", agentScript(t, tok, call, fam.final, result),
				"--enable-auto-tool-choice", "--tool-call-parser", call.parser}
			if call.model == "gptoss" {
				args = append(args, "--chat-template", harmonyTemplate(t))
			}
			s := startServe(t, append(args, fam.flags...)...)
			out := runAgentLoop(t, node, module, s, call.message(), result)
			checkAgentLoop(t, call, out)
		})
	}
}

// runAgentLoop runs the SDK script against s and returns its JSON line.
func runAgentLoop(t *testing.T, node, module string, s *server, question, result string) []byte {
	t.Helper()
	cmd := testwait.Command(t, time.Minute, node, "testdata/openai_sdk_tools.cjs")
	cmd.Env = append(os.Environ(), "OPENAI_MODULE="+module, "BASE_URL=http://"+s.http, "TOOLS="+weatherTool,
		"QUESTION="+question, "TOOL_RESULT="+result)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("openai SDK: %v\n%s\n%s", err, out, stderr)
	}
	return out
}

type sdkCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct{ Name, Arguments string }
}

type sdkTurn struct {
	Content   *string
	ToolCalls []sdkCall
	Finish    string
}

// checkAgentLoop checks the three turns: the call whole (the scenario's exact
// arguments text), the call streamed (the same JSON, or vLLM's streamedArgs),
// the final answer.
func checkAgentLoop(t *testing.T, call toolScenario, out []byte) {
	t.Helper()
	var got struct {
		First    sdkTurn
		Streamed struct {
			Calls  []struct{ ID, Name, Arguments string }
			Finish string
		}
		Final sdkTurn
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	want := call.calls[0]
	f, st, fin := got.First, got.Streamed, got.Final
	if f.Finish != "tool_calls" || f.Content != nil || len(f.ToolCalls) != 1 || f.ToolCalls[0].Function.Name != want.Name ||
		f.ToolCalls[0].Function.Arguments != want.Args || f.ToolCalls[0].Type != "function" {
		t.Fatalf("first turn: %s", out)
	}
	streamed := want.Args
	if call.streamedArgs != "" {
		streamed = call.streamedArgs
	}
	var gotArgs, wantArgs any
	if st.Finish != "tool_calls" || len(st.Calls) != 1 || st.Calls[0].Name != want.Name ||
		(st.Calls[0].Arguments != streamed && (json.Unmarshal([]byte(st.Calls[0].Arguments), &gotArgs) != nil ||
			json.Unmarshal([]byte(streamed), &wantArgs) != nil || !jsonEqual(gotArgs, wantArgs))) || !strings.HasPrefix(st.Calls[0].ID, "chatcmpl-tool-") {
		t.Fatalf("streamed turn: %s", out)
	}
	if fin.Finish != "stop" || fin.Content == nil || *fin.Content != agentFinal || len(fin.ToolCalls) != 0 {
		t.Fatalf("final turn: %s", out)
	}
}
