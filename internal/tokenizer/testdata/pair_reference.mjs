// Reference side of the pair-encoding test: Rust tokenizers' encode(a, pair=b) through its Node
// binding, with the truncation transformers sets for one call (enable_truncation).
// Usage: SWITCHYARD_TOKENIZERS_MODULE=DIR node pair_reference.mjs TOKENIZER_JSON CASES_JSON
// CASES_JSON: [{a, b, pair, add, max, strategy: LongestFirst|OnlyFirst|OnlySecond, left}].
// Prints one line per case: {ids, type_ids} or {error}.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
const require = createRequire(import.meta.url);
const { Tokenizer } = require(process.env.SWITCHYARD_TOKENIZERS_MODULE);
const [tokPath, casesPath] = process.argv.slice(2);
const tok = Tokenizer.fromString(readFileSync(tokPath, "utf8"));
const cases = JSON.parse(readFileSync(casesPath, "utf8"));
for (const c of cases) {
  try {
    if (c.max > 0) tok.setTruncation(c.max, { strategy: c.strategy, direction: c.left ? "left" : "right" });
    else tok.disableTruncation();
    const e = await tok.encode(c.a, c.pair ? c.b : null, { addSpecialTokens: c.add });
    console.log(JSON.stringify({ ids: e.getIds(), type_ids: e.getTypeIds() }));
  } catch (err) {
    console.log(JSON.stringify({ error: String(err) }));
  }
}
