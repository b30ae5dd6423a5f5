// The official openai npm SDK against switchyard, as a new user would point it:
// discover the model, chat (plain and streamed), complete. Prints one JSON line.
const { OpenAI } = require(process.env.OPENAI_MODULE);

async function main() {
  const client = new OpenAI({ baseURL: process.env.BASE_URL + '/v1', apiKey: 'unused', maxRetries: 0 });
  const models = await client.models.list();
  const model = models.data[0].id;
  const messages = [{ role: 'user', content: 'Hello! Please tell me about yourself.' }];
  const chat = await client.chat.completions.create({ model, messages, max_tokens: 40 });
  const stream = await client.chat.completions.create({
    model, messages, max_tokens: 40, stream: true, stream_options: { include_usage: true },
  });
  let streamed = '';
  let usage = null;
  let role = null;
  for await (const chunk of stream) {
    const c = chunk.choices[0];
    if (c && c.delta.role) role = c.delta.role;
    if (c && c.delta.content) streamed += c.delta.content;
    if (chunk.usage) usage = chunk.usage;
  }
  const completion = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 8 });
  let notFound = null;
  try {
    await client.chat.completions.create({ model: 'no-such-model', messages });
  } catch (e) {
    notFound = { status: e.status, message: e.message };
  }
  console.log(JSON.stringify({
    model, chat: chat.choices[0].message.content, finish: chat.choices[0].finish_reason,
    streamed, role, usage, completion: completion.choices[0].text, notFound,
  }));
}

main().catch((e) => { console.error(e); process.exit(1); });
