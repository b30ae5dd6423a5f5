// Reference side of the differential test: @huggingface/tokenizers (tokenizers.js) on node.
// Usage: node reference.mjs MODEL_DIR CORPUS_JSON [bench]
// CORPUS_JSON is a JSON array of strings. Prints one JSON object per corpus entry:
//   {ids, ids_nospecial, decode, decode_skip, stream (for the first 3000 ids)}
// where stream is the chunk list the Rust DecodeStream::step algorithm yields when driven by this
// implementation's decode (tokenizers.js has no DecodeStream of its own).
// With "bench", prints {mb_per_s} for encoding the corpus instead.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
const require = createRequire(import.meta.url);
const { Tokenizer } = require(process.env.SWITCHYARD_TOKENIZERS_JS);

const [dir, corpusPath, mode] = process.argv.slice(2);
const tj = JSON.parse(readFileSync(`${dir}/tokenizer.json`, "utf8"));
const tc = JSON.parse(readFileSync(`${dir}/tokenizer_config.json`, "utf8"));
const tok = new Tokenizer(tj, tc);
const corpus = JSON.parse(readFileSync(corpusPath, "utf8"));
// tokenizers.js throws on an empty id list where tokenizers returns "".
const dec = (ids, skip) => ids.length === 0 ? "" : tok.decode(ids, { skip_special_tokens: skip, clean_up_tokenization_spaces: false });

function stream(ids, skip) {
  // tokenizers/src/tokenizer/mod.rs step_decode_stream, verbatim in JS.
  let window = [], prefix = "", prefixIndex = 0;
  const out = [];
  for (const id of ids) {
    if (prefix === "" && window.length > 0) {
      const np = dec(window, skip);
      if (!np.endsWith("\uFFFD")) { prefix = np; prefixIndex = window.length; }
    }
    window.push(id);
    const s = dec(window, skip);
    if (Buffer.byteLength(s) > Buffer.byteLength(prefix) && !s.endsWith("\uFFFD")) {
      if (!s.startsWith(prefix)) { out.push({ invalid_prefix: true }); window = []; prefix = ""; prefixIndex = 0; continue; }
      const newText = s.slice(prefix.length);
      const npi = window.length - prefixIndex;
      window = window.slice(prefixIndex);
      prefix = dec(window, skip);
      prefixIndex = npi;
      out.push(newText);
    } else {
      out.push("");
    }
  }
  return out;
}

if (mode === "bench") {
  let bytes = 0;
  for (const t of corpus) bytes += Buffer.byteLength(t);
  for (const t of corpus) tok.encode(t, { add_special_tokens: false }); // warm up
  let iters = 0;
  const start = process.hrtime.bigint();
  let elapsed = 0;
  while (elapsed < 1.5) {
    for (const t of corpus) tok.encode(t, { add_special_tokens: false });
    iters++;
    elapsed = Number(process.hrtime.bigint() - start) / 1e9;
  }
  console.log(JSON.stringify({ mb_per_s: (bytes * iters) / elapsed / 1e6 }));
} else {
  for (const t of corpus) {
    const ids = Array.from(tok.encode(t, { add_special_tokens: true }).ids);
    const ids_nospecial = Array.from(tok.encode(t, { add_special_tokens: false }).ids);
    console.log(JSON.stringify({
      ids, ids_nospecial,
      decode: dec(ids, false), decode_skip: dec(ids, true),
      // The JS stream re-decodes per id: bounded so the long inputs stay cheap.
      stream: stream(ids.slice(0, 3000), false),
    }));
  }
}
