// The official openai npm SDK's embeddings.create against switchyard serving a
// pooling model. The SDK asks for base64 unless told otherwise and decodes it to
// floats itself, so both encodings are exercised. Prints one JSON line.
const { OpenAI } = require(process.env.OPENAI_MODULE);

async function main() {
  const client = new OpenAI({ baseURL: process.env.BASE_URL + '/v1', apiKey: 'unused', maxRetries: 0 });
  const model = (await client.models.list()).data[0].id;
  const ids = JSON.parse(process.env.TOKEN_INPUTS);
  const byIds = await client.embeddings.create({ model, input: ids });
  const asFloat = await client.embeddings.create({ model, input: ids[0], encoding_format: 'float' });
  const texts = await client.embeddings.create({ model, input: ['The food was delicious', 'and the waiter was kind'] });
  const dims = await client.embeddings.create({ model, input: 'short', dimensions: 4 });
  console.log(JSON.stringify({
    model: byIds.model, object: byIds.object,
    byIds: byIds.data.map((d) => ({ index: d.index, object: d.object, embedding: d.embedding })),
    usage: byIds.usage,
    asFloat: asFloat.data[0].embedding,
    texts: texts.data.map((d) => d.embedding.length), textUsage: texts.usage,
    dims: dims.data[0].embedding,
  }));
}

main().catch((e) => { console.error(e); process.exit(1); });
