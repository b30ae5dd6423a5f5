// The official openai npm SDK in an agent loop against switchyard with a tool
// parser: ask (the model calls a tool), the same streamed, then send the tool's
// result back and get the final answer. Prints one JSON line.
const { OpenAI } = require(process.env.OPENAI_MODULE);

async function main() {
  const client = new OpenAI({ baseURL: process.env.BASE_URL + '/v1', apiKey: 'unused', maxRetries: 0 });
  const model = (await client.models.list()).data[0].id;
  const tools = JSON.parse(process.env.TOOLS);
  const messages = [{ role: 'user', content: process.env.QUESTION }];
  const first = await client.chat.completions.create({ model, messages, tools, max_tokens: 200 });
  const msg = first.choices[0].message;

  const stream = await client.chat.completions.create({ model, messages, tools, max_tokens: 200, stream: true });
  const calls = [];
  let finish = null;
  for await (const chunk of stream) {
    const c = chunk.choices[0];
    if (!c) continue;
    for (const tc of c.delta.tool_calls || []) {
      calls[tc.index] = calls[tc.index] || { id: '', name: '', arguments: '' };
      if (tc.id) calls[tc.index].id = tc.id;
      if (tc.function && tc.function.name) calls[tc.index].name += tc.function.name;
      if (tc.function && tc.function.arguments) calls[tc.index].arguments += tc.function.arguments;
    }
    if (c.finish_reason) finish = c.finish_reason;
  }

  messages.push({ role: 'assistant', content: msg.content, tool_calls: msg.tool_calls });
  for (const tc of msg.tool_calls) {
    messages.push({ role: 'tool', tool_call_id: tc.id, content: process.env.TOOL_RESULT });
  }
  const final = await client.chat.completions.create({ model, messages, tools, max_tokens: 200 });
  console.log(JSON.stringify({
    first: { content: msg.content, toolCalls: msg.tool_calls, finish: first.choices[0].finish_reason },
    streamed: { calls, finish },
    final: { content: final.choices[0].message.content, toolCalls: final.choices[0].message.tool_calls, finish: final.choices[0].finish_reason },
  }));
}

main().catch((e) => { console.error(e); process.exit(1); });
