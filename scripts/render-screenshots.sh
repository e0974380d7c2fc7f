#!/usr/bin/env bash
# Renders the pages docs/render.md shows and takes the first screen of each
# (1200 × 900) in headless Chromium into docs/screenshots/. With Pillow
# (PYTHON=/path/to/python with PIL) the PNGs are reduced to 64 colours, which
# keeps each near 50 KB.
#
#   scripts/render-screenshots.sh            (needs ../shared/fixtures, chromium)
set -euo pipefail
cd "$(dirname "$0")/.."
FIX=../shared/fixtures
OUT=docs/screenshots
BROWSER="${CHROMIUM:-$(command -v chromium || command -v chromium-browser || command -v google-chrome)}"
PYTHON="${PYTHON:-python3}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
cargo build -q --release -p memtool
MEMTOOL="${CARGO_TARGET_DIR:-target}/release/memtool"
mkdir -p "$OUT"
shot() { # shot NAME INPUTS... (RANKS=1: a `ranks --format html` page of them)
  local name="$1"; shift
  if [ "${RANKS:-}" = 1 ]; then
    "$MEMTOOL" ranks "$@" --format html -o "$TMP/$name.html" 2>/dev/null
  else
    "$MEMTOOL" render "$@" -o "$TMP/$name.html" 2>/dev/null
  fi
  timeout 120 "$BROWSER" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --user-data-dir="$TMP/profile" --window-size=1200,900 --virtual-time-budget=5000 \
    --screenshot="$(pwd)/$OUT/$name.png" "file://$TMP/$name.html" >/dev/null 2>&1 || true
  if "$PYTHON" -c 'import PIL' 2>/dev/null; then
    "$PYTHON" - "$OUT/$name.png" <<'PY'
import sys
from PIL import Image
p = sys.argv[1]
Image.open(p).convert("RGB").quantize(colors=64, method=Image.Quantize.MEDIANCUT).save(p, optimize=True)
PY
  fi
  echo "$OUT/$name.png: $(stat -c %s "$OUT/$name.png") bytes"
}
shot tf_cnn_leak "$FIX/xspace/tf_cnn_leak.xplane.pb"
shot jax_transformer_small "$FIX/xspace/jax_transformer_small.xplane.pb"
shot bcrafton_memory_snapshot "$FIX/torch/bcrafton_memory_snapshot.pickle"
shot hta_df_index_resolver "$FIX/torch/hta_df_index_resolver.pt.trace.json.gz"
shot pprof_memory1-9 "$FIX"/pprof/memory{1,2,3,4,5,6,7,8,9}.prof
# The ranks page: 64 ranks derived from the shared snapshot, three 30 % higher.
python3 scripts/make_rank_fixtures.py fleet "$TMP/ranks" --from "$FIX/torch/bcrafton_memory_snapshot.pickle" >/dev/null
RANKS=1 shot ranks_fleet_64 "$TMP/ranks"
