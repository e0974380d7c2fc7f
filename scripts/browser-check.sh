#!/usr/bin/env bash
# Opens memtool's HTML reports in headless Chromium from file:// and checks that
# the page's script ran without errors, drew its charts, printed nothing to the
# console (a blocked request or a CSP violation would), made no network request,
# and that profile text written as markup (</script><img onerror=...>) stayed text;
# then that every page fits a 1,400 and an 850 px window (scripts/page_fit.py).
# Screenshots of every report are kept under OUT_DIR/screenshots to look at.
#
#   scripts/browser-check.sh [OUT_DIR]        (default: target/browser-check)
#
# Without a browser it prints a notice and exits 0, unless
# MEMTOOL_REQUIRE_BROWSER=1 (CI), where that is a failure.
# Needs Debian's `chromium` (apt-get install -y chromium) or CHROMIUM=/path.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-target/browser-check}"

BROWSER="${CHROMIUM:-}"
if [ -z "$BROWSER" ]; then
  for b in chromium chromium-browser google-chrome; do
    if command -v "$b" >/dev/null 2>&1; then BROWSER="$(command -v "$b")"; break; fi
  done
fi
if [ -z "$BROWSER" ]; then
  if [ "${MEMTOOL_REQUIRE_BROWSER:-}" = 1 ]; then
    echo "browser-check: FAILED: no chromium found and MEMTOOL_REQUIRE_BROWSER=1" >&2
    exit 1
  fi
  echo "browser-check: skipped: no chromium found (apt-get install -y chromium, or set CHROMIUM)"
  exit 0
fi

rm -rf "$OUT"
mkdir -p "$OUT/reports" "$OUT/screenshots" "$OUT/logs"
OUT="$(cd "$OUT" && pwd)"
REPORTS="$OUT/reports"

# --- the reports ------------------------------------------------------------
cargo build -q -p memtool -p memtool-gen
MEMTOOL="${CARGO_TARGET_DIR:-target}/debug/memtool"
# Event streams (allocator events with addresses, the hostile names) come from
# the core's tests, which build them through the model.
MEMTOOL_RENDER_SAMPLES="$REPORTS" cargo test -q -p memtool-core --lib render::tests::samples_for_the_browser_check >/dev/null
FIX=../shared/fixtures
if [ -d "$FIX/pprof" ]; then
  "$MEMTOOL" render "$FIX/pprof/memory.prof" -o "$REPORTS/pprof-memory.html"
  "$MEMTOOL" render "$FIX"/pprof/memory{1,2,3,4,5,6,7,8,9}.prof -o "$REPORTS/pprof-series.html"
  "$MEMTOOL" render "$FIX/pprof/memory1.prof" "$FIX/pprof/memory9.prof" -o "$REPORTS/pprof-diff.html"
  "$MEMTOOL" render "$FIX/pprof/sharded.prof" -o "$REPORTS/pprof-sharded.html"
  # One page per kind of profile a person would open: a JAX compiled program,
  # a PyTorch snapshot and trace, a TensorFlow allocator timeline. A format
  # this build cannot read yet is skipped with a notice.
  optional() { # optional NAME ARGS...
    local name="$1"; shift
    if ! "$MEMTOOL" render "$@" -o "$REPORTS/$name.html" 2>"$OUT/logs/$name.render.stderr"; then
      echo "browser-check: note: $name not rendered: $(head -c 200 "$OUT/logs/$name.render.stderr")"
      rm -f "$REPORTS/$name.html"
    fi
  }
  optional jax-train-step "$FIX/xspace/jax_transformer_small.xplane.pb" --memory 'jit_train_step(34)'
  optional torch-snapshot "$FIX/torch/torch_cpu_transformer.snapshot.pickle"
  optional torch-trace "$FIX/torch/torch_cpu_transformer.pt.trace.json.gz"
  optional tf-cnn-leak "$FIX/xspace/tf_cnn_leak.xplane.pb"
  # The pages docs/render.md shows: every program of a JAX run, a CUDA
  # snapshot with its allocator state, a CUDA trace.
  optional jax-transformer "$FIX/xspace/jax_transformer_small.xplane.pb"
  optional bcrafton-snapshot "$FIX/torch/bcrafton_memory_snapshot.pickle"
  optional hta-trace "$FIX/torch/hta_df_index_resolver.pt.trace.json.gz"
  # A run busy from its first step to its last (900 steps of tf_cnn's
  # pattern, then its flat tail): the first timeline must open on the whole
  # run, its peak shown, not zoomed to the tail.
  "${CARGO_TARGET_DIR:-target}/debug/memtool-gen" xspace --events 20000 --from "$FIX/xspace/tf_cnn.xplane.pb" -o "$OUT/busy_steps.xplane.pb" >/dev/null
  optional busy-steps "$OUT/busy_steps.xplane.pb"
elif [ "${MEMTOOL_REQUIRE_FIXTURES:-}" = 1 ]; then
  echo "browser-check: FAILED: $FIX is missing and MEMTOOL_REQUIRE_FIXTURES=1" >&2
  exit 1
fi

# --- the browser --------------------------------------------------------------
run_browser() { # run_browser PAGE dom|png|pdf DEST LOG NETLOG [EXTRA_FLAGS...]
  local page="$1" kind="$2" dest="$3" log="$4" net="$5" profile_dir
  shift 5
  profile_dir="$(mktemp -d)"
  local args=(--headless --no-sandbox --disable-gpu --disable-background-networking
    --disable-component-update --disable-sync --disable-default-apps --no-first-run
    --user-data-dir="$profile_dir" --enable-logging=stderr --v=0 --log-net-log="$net"
    --window-size=1300,2600 --virtual-time-budget=5000 "$@")
  # Twice at most: on a loaded machine Chromium itself now and then fails
  # to start a helper process ("Zygote could not fork"), or crashes (a
  # segfault while printing one page, no screenshot of another, in two runs
  # of 2026-11-30 on pages byte-identical to those of runs that passed),
  # and writes nothing. A page that fails twice fails the check.
  local attempt
  for attempt in 1 2; do
    case "$kind" in
      dom) timeout 120 "$BROWSER" "${args[@]}" --dump-dom "file://$page" >"$dest" 2>"$log" || true ;;
      png) timeout 120 "$BROWSER" "${args[@]}" --screenshot="$dest" "file://$page" >/dev/null 2>"$log" || true ;;
      pdf) timeout 120 "$BROWSER" "${args[@]}" --no-pdf-header-footer --print-to-pdf="$dest" "file://$page" >/dev/null 2>"$log" || true ;;
    esac
    if [ -s "$dest" ]; then break; fi
  done
  rm -rf "$profile_dir"
}

FAILED=0
fail() { echo "browser-check: FAIL: $*" >&2; FAILED=1; }


check_page() { # check_page FILE -> 0 when every check passes
  local page="$1" name
  name="$(basename "$page" .html)"
  local dom="$OUT/logs/$name.dom.html" log="$OUT/logs/$name.stderr" net="$OUT/logs/$name.netlog.json"
  run_browser "$page" dom "$dom" "$log" "$net"
  local ok=0
  grep -q 'data-memtool="ready"' "$dom" || { fail "$name: the script did not finish (status: $(grep -o 'memtool-js:[^<]*' "$dom" | head -1))"; ok=1; }
  if grep -q ':CONSOLE' "$log"; then fail "$name: console output: $(grep ':CONSOLE' "$log" | head -3)"; ok=1; fi
  # As text the payload is escaped (&lt;img); as markup it is an element, and
  # one of the names sets data-xss on <html> when its onerror runs.
  if grep -qiE '<img[ />]' "$dom" || grep -qE '<html[^>]*data-xss' "$dom"; then fail "$name: markup from the profile became HTML"; ok=1; fi
  # Chromium's own service requests (time, update checks, accounts) appear in
  # the net log even with background networking off; the page makes none.
  local urls
  urls="$(grep -o '"url":"[^"]*"' "$net" 2>/dev/null | grep -v -E '"url":"https?://([a-z0-9-]+\.)*(google\.com|googleapis\.com|gstatic\.com|gvt1\.com)[/:"]' | sort -u || true)"
  if [ -n "$urls" ]; then fail "$name: network requests: $urls"; ok=1; fi
  local charts
  charts="$(grep -o 'data-memtool-charts="[0-9]*"' "$dom" | grep -o '[0-9]*' || echo 0)"
  [ "${charts:-0}" -gt 0 ] || { fail "$name: no chart drawn"; ok=1; }
  local timelines paths
  timelines="$(grep -o 'class="timeline chart"' "$dom" | wc -l)"
  paths="$(grep -o '<path ' "$dom" | wc -l)"
  if [ "$timelines" -gt 0 ] && [ "$paths" -eq 0 ]; then fail "$name: timelines have no areas"; ok=1; fi
  if grep -q 'class="flame"' "$dom" && ! grep -q 'data-nodes="[1-9]' "$dom"; then fail "$name: empty call tree"; ok=1; fi
  if grep -q 'class="addr' "$dom" && ! grep -q 'data-cells="[1-9]' "$dom"; then fail "$name: empty address view"; ok=1; fi
  if grep -q '"steps":\[' "$page" && ! grep -q 'class="step"' "$dom"; then fail "$name: step boundaries not drawn"; ok=1; fi
  # The page drives its own hover, zoom, sort, filter, call-tree zoom,
  # drill-down (a click on a band → its blocks → a block's stack) and
  # allocator-state view.
  local st="$OUT/logs/$name.selftest.html"
  run_browser "$page#memtool-selftest" dom "$st" "$OUT/logs/$name.selftest.stderr" "$OUT/logs/$name.selftest.netlog.json"
  local results
  results="$(grep -o 'data-memtool-selftest="[^"]*"' "$st" | head -1)"
  if [ -z "$results" ] || echo "$results" | grep -q FAIL || ! grep -q 'data-memtool="ready"' "$st"; then
    fail "$name: interaction self-test: ${results:-did not run}"; ok=1
  fi
  if grep -q '"blocks":{' "$page" && ! echo "$results" | grep -q 'drill:ok.*stack:ok'; then
    fail "$name: the drill-down was not exercised: $results"; ok=1
  fi
  if grep -q '"blocks":{' "$page" && grep -q 'class="flame" data-mem' "$page" && ! echo "$results" | grep -q 'tree:ok'; then
    fail "$name: the call tree's block list was not exercised: $results"; ok=1
  fi
  if grep -q 'class="addr" data-mem' "$page" && ! echo "$results" | grep -q 'addr:ok'; then
    fail "$name: the address view's axes and tooltip were not exercised: $results"; ok=1
  fi
  if grep -q 'class="state" data-mem' "$page" && ! echo "$results" | grep -q 'state:ok'; then
    fail "$name: the allocator-state view was not exercised: $results"; ok=1
  fi
  run_browser "$page" png "$OUT/screenshots/$name.png" "$OUT/logs/$name.screenshot.stderr" "$OUT/logs/$name.screenshot.netlog.json"
  [ -s "$OUT/screenshots/$name.png" ] || { fail "$name: no screenshot"; ok=1; }
  # The dark scheme, and the page as printed.
  run_browser "$page" png "$OUT/screenshots/$name-dark.png" "$OUT/logs/$name.dark.stderr" "$OUT/logs/$name.dark.netlog.json" --force-dark-mode --blink-settings=preferredColorScheme=0
  run_browser "$page" pdf "$OUT/screenshots/$name.pdf" "$OUT/logs/$name.pdf.stderr" "$OUT/logs/$name.pdf.netlog.json"
  if ! head -c 5 "$OUT/screenshots/$name.pdf" 2>/dev/null | grep -q '%PDF-'; then fail "$name: printing made no PDF"; ok=1; fi
  [ $ok -eq 0 ] && echo "browser-check: ok: $name ($charts charts, $paths areas; ${results#data-memtool-selftest=})"
  return $ok
}

# The checker must catch a broken page, or its passes mean nothing.
cat >"$OUT/logs/selftest.html" <<'HTML'
<!DOCTYPE html><html><head><meta charset="utf-8"></head><body><script>console.error("selftest");</script></body></html>
HTML
cat >"$OUT/logs/selftest-xss.html" <<'HTML'
<!DOCTYPE html><html><head><meta charset="utf-8"></head><body><div data-memtool-charts="1"></div><img src=x onerror="document.documentElement.setAttribute('data-xss','ran')"><script>document.documentElement.setAttribute('data-memtool','ready')</script></body></html>
HTML
for bad in selftest selftest-xss; do
  if check_page "$OUT/logs/$bad.html" 2>/dev/null; then
    echo "browser-check: FAILED: the self-test page $bad.html passed the checks" >&2
    exit 1
  fi
done
rm -f "$OUT"/screenshots/selftest*
FAILED=0

shopt -s nullglob
pages=("$REPORTS"/*.html)
[ ${#pages[@]} -gt 0 ] || { echo "browser-check: FAILED: no reports were made" >&2; exit 1; }
for page in "${pages[@]}"; do check_page "$page" || true; done
# Every other shared fixture's page, opened once: its script finishes and
# its first frame is reported beside the pages checked in full above.
if [ -d "$FIX" ]; then
  mkdir -p "$OUT/every"
  for input in "$FIX"/pprof/*.prof "$FIX"/torch/*.pickle "$FIX"/torch/*.json* "$FIX"/xspace/*.xplane.pb; do
    name="$(basename "$input")"
    page="$OUT/every/$name.html"
    if ! "$MEMTOOL" render "$input" -o "$page" 2>"$OUT/logs/every-$name.render.stderr"; then
      # A fixture that is not a profile to draw (empty.prof) says why.
      echo "browser-check: note: $name not rendered: $(head -c 200 "$OUT/logs/every-$name.render.stderr")"
      continue
    fi
    dom="$OUT/logs/every-$name.dom.html"
    run_browser "$page" dom "$dom" "$OUT/logs/every-$name.stderr" "$OUT/logs/every-$name.netlog.json"
    grep -q 'data-memtool="ready"' "$dom" || fail "$name: the script did not finish (status: $(grep -o 'memtool-js:[^<]*' "$dom" | head -1))"
    if grep -q ':CONSOLE' "$OUT/logs/every-$name.stderr"; then fail "$name: console output: $(grep ':CONSOLE' "$OUT/logs/every-$name.stderr" | head -3)"; fi
    done
fi
# `ranks --format html`: a page with no script (inline SVG strips), so it is
# checked for what a static page can get wrong: console output, a request,
# markup from a file name, strips not drawn. 64 ranks derived from a shared
# snapshot (three outliers), and a set whose file names hold markup.
if [ -f "$FIX/torch/bcrafton_memory_snapshot.pickle" ]; then
  RANKS="$OUT/ranks"
  mkdir -p "$RANKS/hostile"
  python3 scripts/make_rank_fixtures.py fleet "$RANKS/fleet" --from "$FIX/torch/bcrafton_memory_snapshot.pickle" >/dev/null
  python3 scripts/make_rank_fixtures.py oom "$RANKS/oom" --ranks 2 >/dev/null
  cp "$RANKS/oom/snapshot-0.pickle" "$RANKS/hostile/<img src=x onerror=document.documentElement.setAttribute('data-xss',1)>_1.pickle"
  cp "$RANKS/oom/snapshot-1.pickle" "$RANKS/hostile/rank_2.pickle"
  for set in fleet hostile; do
    page="$OUT/ranks-$set.html"
    "$MEMTOOL" ranks "$RANKS/$set" --format html -o "$page" 2>"$OUT/logs/ranks-$set.stderr" || { fail "ranks-$set: not written: $(head -c 200 "$OUT/logs/ranks-$set.stderr")"; continue; }
    dom="$OUT/logs/ranks-$set.dom.html" log="$OUT/logs/ranks-$set.browser.stderr" net="$OUT/logs/ranks-$set.netlog.json"
    run_browser "$page" dom "$dom" "$log" "$net"
    if grep -q ':CONSOLE' "$log"; then fail "ranks-$set: console output: $(grep ':CONSOLE' "$log" | head -3)"; fi
    if grep -qiE '<img[ />]' "$dom" || grep -qE '<html[^>]*data-xss' "$dom"; then fail "ranks-$set: markup from a file name became HTML"; fi
    urls="$(grep -o '"url":"[^"]*"' "$net" 2>/dev/null | grep -v -E '"url":"https?://([a-z0-9-]+\.)*(google\.com|googleapis\.com|gstatic\.com|gvt1\.com)[/:"]' | sort -u || true)"
    [ -z "$urls" ] || fail "ranks-$set: network requests: $urls"
    strips="$(grep -o '<div class="row[^"]*"' "$dom" | wc -l)"
    [ "$strips" -gt 0 ] && grep -q '<path d="M0' "$dom" || fail "ranks-$set: no strip drawn"
    if [ "$set" = fleet ] && ! grep -q '<details open="">' "$dom"; then fail "ranks-fleet: the outlier's detail is not open"; fi
    run_browser "$page" png "$OUT/screenshots/ranks-$set.png" "$OUT/logs/ranks-$set.screenshot.stderr" "$OUT/logs/ranks-$set.screenshot.netlog.json"
    [ -s "$OUT/screenshots/ranks-$set.png" ] || fail "ranks-$set: no screenshot"
    echo "browser-check: ok: ranks-$set ($strips strips, $(wc -c <"$page") bytes)"
  done
fi
# When each page's script had finished and its first frame after that was
# drawn, in ms since navigation started, in real time (virtual time, which
# the checks above use, does not read what a person waits): reported, not a
# timed test, as machines differ.
echo "browser-check: first frame (ms since navigation; page bytes):"
python3 scripts/first_frame.py "$BROWSER" "${pages[@]}" "$OUT"/every/*.html >"$OUT/first-frame.txt" \
  || fail "first-frame times could not be measured"
awk '{ printf "  %-44s %6s ms  %9s bytes\n", $1, $2, $3 }' "$OUT/first-frame.txt"
never="$(awk '$2 == "?" { print $1 }' "$OUT/first-frame.txt" | tr '\n' ' ')"
[ -z "$never" ] || fail "no first frame within 20 s: $never"
# Every page read at 1,400 and 850 px: no wider than the window, no taller
# than 8 screens per memory, no two chart labels on top of each other.
echo "browser-check: page fit (1,400 and 850 px wide):"
if ! python3 scripts/page_fit.py "$BROWSER" "${pages[@]}" "$OUT"/every/*.html >"$OUT/page-fit.txt"; then
  fail "pages that do not fit: $(grep -c FAIL "$OUT/page-fit.txt") (see $OUT/page-fit.txt)"
fi
sed 's/^/  /' "$OUT/page-fit.txt"
if [ $FAILED -ne 0 ]; then
  echo "browser-check: FAILED (logs and screenshots in $OUT)" >&2
  exit 1
fi
echo "browser-check: all ${#pages[@]} reports passed; screenshots in $OUT/screenshots"
