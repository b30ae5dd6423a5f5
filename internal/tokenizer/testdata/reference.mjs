// Reference side of the differential test: Hugging Face's Rust tokenizers, through its own Node
// binding (npm "tokenizers", prebuilt native modules), on tokenizer.json alone, as
// Tokenizer::from_file loads it. vLLM runs the same Rust library.
// Usage: SWITCHYARD_TOKENIZERS_MODULE=DIR node reference.mjs MODEL_DIR CORPUS_JSON [bench]
// DIR is the installed package (node_modules/tokenizers). CORPUS_JSON is a JSON array of strings.
// Prints one JSON object per corpus entry:
//   {ids, ids_nospecial, decode, decode_skip, prefixes (decode of ids[:k] for k = 1..64: ends
//    cut mid-character), stream and stream_skip (first 3000 ids), primed (vLLM-style prime with
//    a prompt prefix, then the next 200 ids)}
// where stream is the chunk list Rust's DecodeStream::step yields. The Node binding has no
// DecodeStream, so step_decode_stream is ported below, verbatim, over the binding's decode.
// With "bench", prints {mb_per_s} for encoding the corpus instead.
// Runs on Node 18 and later: the binding is CommonJS, loaded through createRequire.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
const require = createRequire(import.meta.url);
const { Tokenizer } = require(process.env.SWITCHYARD_TOKENIZERS_MODULE);

const [dir, corpusPath, mode] = process.argv.slice(2);
const tok = Tokenizer.fromFile(`${dir}/tokenizer.json`);
const corpus = JSON.parse(readFileSync(corpusPath, "utf8"));
// The binding's encode and decode return promises (the work runs on libuv's thread pool).
const enc = async (text, addSpecial) => (await tok.encode(text, null, { addSpecialTokens: addSpecial })).getIds();
const dec = (ids, skip) => tok.decode(ids, skip);

const half = (ids) => Math.min(Math.floor(ids.length / 2), 40);

async function stream(ids, skip, prompt = []) {
  // tokenizers/src/tokenizer/mod.rs step_decode_stream, verbatim in JS.
  let window = [], prefix = "", prefixIndex = 0;
  const out = [];
  // vLLM FastIncrementalDetokenizer.__init__: prime with the shortest prompt suffix of 4..23 ids
  // whose decode (skip_special_tokens=True, the Python binding's default) has no U+FFFD.
  let suffix = prompt;
  if (prompt.length > 4) {
    for (let i = 4; i < Math.min(prompt.length + 1, 24); i++) {
      const s = prompt.slice(prompt.length - i);
      if (!(await dec(s, true)).includes("\uFFFD")) { suffix = s; break; }
    }
  }
  const all = suffix.concat(ids);
  for (let k = 0; k < all.length; k++) {
    const id = all[k];
    if (k === suffix.length) out.length = 0; // the prompt's own text is discarded
    if (prefix === "" && window.length > 0) {
      const np = await dec(window, skip);
      if (!np.endsWith("\uFFFD")) { prefix = np; prefixIndex = window.length; }
    }
    window.push(id);
    const s = await dec(window, skip);
    if (Buffer.byteLength(s) > Buffer.byteLength(prefix) && !s.endsWith("\uFFFD")) {
      // Rust returns DecodeStreamError::InvalidPrefix; vLLM's _protected_step then starts a
      // fresh stream with this id. The Go side is never expected to get here.
      if (!s.startsWith(prefix)) { out.push({ invalid_prefix: true }); window = []; prefix = ""; prefixIndex = 0; continue; }
      const newText = s.slice(prefix.length);
      const npi = window.length - prefixIndex;
      window = window.slice(prefixIndex);
      prefix = await dec(window, skip);
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
  for (const t of corpus) await enc(t, false); // warm up
  let iters = 0;
  const start = process.hrtime.bigint();
  let elapsed = 0;
  while (elapsed < 1.5) {
    for (const t of corpus) await enc(t, false);
    iters++;
    elapsed = Number(process.hrtime.bigint() - start) / 1e9;
  }
  console.log(JSON.stringify({ mb_per_s: (bytes * iters) / elapsed / 1e6 }));
} else {
  // The entries run concurrently (each one's stream is sequential, as Rust's): the thread pool
  // stays busy instead of each decode waiting for the one before. Printed in corpus order.
  const results = await Promise.all(corpus.map(async (t) => {
    const ids = await enc(t, true);
    const [ids_nospecial, decode, decode_skip, prefixes, stream_, stream_skip, primed] = await Promise.all([
      enc(t, false), dec(ids, false), dec(ids, true),
      Promise.all(ids.slice(0, 64).map((_, k) => dec(ids.slice(0, k + 1), false))),
      // The ported stream re-decodes its window per id: bounded so the long inputs stay cheap.
      stream(ids.slice(0, 3000), false),
      stream(ids.slice(0, 3000), true),
      // Prompt = the first half of the ids (at most 40), continuation = the next 200.
      stream(ids.slice(half(ids), half(ids) + 200), true, ids.slice(0, half(ids))),
    ]);
    return JSON.stringify({ ids, ids_nospecial, decode, decode_skip, prefixes, stream: stream_, stream_skip, primed });
  }));
  for (const line of results) console.log(line);
}
