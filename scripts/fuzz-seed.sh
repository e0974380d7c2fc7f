#!/usr/bin/env bash
# Seeds the fuzz corpora with every fixture (decompressed too, so the fuzzer
# starts inside the decoders rather than inside gzip).
set -euo pipefail
cd "$(dirname "$0")/.."
for target in load analyses; do
  dir="fuzz/corpus/$target"
  mkdir -p "$dir"
  find tests ../shared/fixtures -type f -size -4M 2>/dev/null | while read -r f; do
    name=$(echo "$f" | tr '/' '_')
    cp "$f" "$dir/$name"
    if gzip -t "$f" 2>/dev/null; then gzip -dc "$f" > "$dir/$name.raw"; fi
  done
done
echo "seeded: $(ls fuzz/corpus/load | wc -l) files per target"
