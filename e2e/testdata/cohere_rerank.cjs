// Cohere's official SDK against switchyard's rerank: the v2 client (POST /v2/rerank)
// and the v1 client (POST /v1/rerank), as a Cohere user would call them. Prints one JSON
// object: {v2, v1}, the SDK's parsed answers.
// Env: COHERE_MODULE (the installed package), BASE_URL, QUERY, DOCUMENTS (a JSON list).
const { CohereClientV2, CohereClient } = require(process.env.COHERE_MODULE);
(async () => {
  const opts = { token: "unused", environment: process.env.BASE_URL };
  const documents = JSON.parse(process.env.DOCUMENTS);
  const query = process.env.QUERY;
  const v2 = await new CohereClientV2(opts).rerank({ model: "switchyard", query, documents, topN: 2 });
  const v1 = await new CohereClient(opts).rerank({ model: "switchyard", query, documents, returnDocuments: true });
  console.log(JSON.stringify({ v2, v1 }));
})().catch((e) => { console.error(e); process.exit(1); });
