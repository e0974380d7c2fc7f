#!/usr/bin/env bash
# Benchmark (not a test): time and peak memory of memtool on an XSpace with
# EVENTS allocator events (default 1,000,000), generated from a real profile
# by crates/memtool/examples/xspace_gen.rs.
#
#   scripts/bench-xspace.sh [SOURCE.xplane.pb] [EVENTS]
#
# SOURCE defaults to ../shared/fixtures/xspace/tf_cnn.xplane.pb. Needs
# /usr/bin/time (GNU time) for the peak resident memory.
set -euo pipefail
cd "$(dirname "$0")/.."
source="${1:-../shared/fixtures/xspace/tf_cnn.xplane.pb}"
events="${2:-1000000}"
target="${CARGO_TARGET_DIR:-target}"
cargo build --release -q -p memtool --bin memtool --example xspace_gen
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
file="$work/bench.xplane.pb"
"$target/release/examples/xspace_gen" "$source" "$file" "$events"
echo "input: $(du -h "$file" | cut -f1)"
printf '%-8s %10s %14s\n' command seconds peak_rss_MiB
for command in summary peak leaks frag; do
  /usr/bin/time -f '%e %M' -o "$work/time" \
    "$target/release/memtool" "$command" "$file" --format json >/dev/null
  read -r seconds kib <"$work/time"
  printf '%-8s %10s %14s\n' "$command" "$seconds" "$((kib / 1024))"
done
