#!/usr/bin/env bash
# Looks at HTML reports as a person would, in headless Chromium: each must
# render its charts, log no console errors, and, at 1200 and 800 px wide,
# show no text cut by a chart's edge, no labels on top of each other, no
# point label across a line or a point of its chart, and no page wider
# than the window (scripts/html-check.js measures it in the
# browser's own layout). Screenshots at both widths are left beside them.
#
#   scripts/html-check.sh [report.html ...]
#
# Without arguments: the golden fixture, a 10-stage and a 20-stage sweep
# (tests/fixtures/sweep-*-stages.json, from real runs against the built-in
# simulator), and a sweep with GPU figures and a price
# (tests/fixtures/sweep-gpus.json: `llmsweep sim --gpus 2 --dcgm-port P`, run
# with --gpu-metrics and --gpu-hourly-cost). A report with a GPU section must
# draw its power-against-rate chart (checked like every chart), and gets a
# screenshot of that section of its own ($name-gpus-$width.png). Needs
# Debian's chromium (apt-get install chromium); .ci/run installs it.
# LLMSWEEP_BIN=path renders the reports with that binary instead of `cargo
# run` (.ci/run passes the one `cargo test --locked --no-run` built: a
# `cargo run` would build the crate once more, without the tests' features).
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/html-check
mkdir -p "$out"
reports=("$@")
if [ ${#reports[@]} -eq 0 ]; then
  for f in tests/fixtures/report.json tests/fixtures/sweep-10-stages.json tests/fixtures/sweep-20-stages.json tests/fixtures/sweep-gpus.json; do
    html="$out/$(basename "$f" .json).html"
    if [ -n "${LLMSWEEP_BIN:-}" ]; then
      "$LLMSWEEP_BIN" report "$f" --format html --out "$html" >/dev/null
    else
      cargo run --quiet --locked -- report "$f" --format html --out "$html" >/dev/null
    fi
    reports+=("$html")
  done
fi
profile=$(mktemp -d)
tmp=$(mktemp -d)
trap 'rm -rf "$profile" "$tmp"' EXIT
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
       --disable-background-networking --disable-component-update --disable-sync
       --user-data-dir="$profile" --enable-logging=stderr --v=0)

fail=0
for html in "${reports[@]}"; do
  name=$(basename "$html" .html)
  # A copy with the check at the end of the body.
  checked="$tmp/$name.html"
  sed 's#</body></html>#<script src="file://'"$(realpath scripts/html-check.js)"'"></script></body></html>#' "$html" >"$checked"
  for width in 1200 800; do
    png="$out/$name-$width.png"
    log="$tmp/$name-$width.log"
    rm -f "$png"
    timeout 60 chromium "${flags[@]}" --window-size=$width,2400 --screenshot="$png" "file://$(realpath "$html")" 2>"$log" || true
    dom=$(timeout 60 chromium "${flags[@]}" --window-size=$width,2400 --dump-dom "file://$(realpath "$checked")" 2>>"$log" || true)
    what="html-check: $name at $width px"
    if [ ! -s "$png" ] || [ "$(stat -c %s "$png")" -lt 20000 ]; then
      echo "$what: no usable screenshot at $png"; fail=1
    fi
    if ! grep -q "<svg" <<<"$dom"; then
      echo "$what: the page did not render its charts"; fail=1
    fi
    if grep -E "CONSOLE|Uncaught|SyntaxError" "$log" | grep -v "Fontconfig"; then
      echo "$what: the page logged console errors"; fail=1
    fi
    if grep -q '<h2>GPUs (DCGM)</h2>' "$html"; then
      if ! grep -q 'aria-label="Power against rate"' <<<"$dom"; then
        echo "$what: the GPU section has no power-against-rate chart"; fail=1
      fi
      # The GPU section alone (everything before its heading left out), as a
      # person scrolled to it sees it.
      gpus="$tmp/$name-gpus.html"
      sed 's#</body></html>#<script>(function(){var h=[].slice.call(document.querySelectorAll("h2")).filter(function(e){return e.textContent.indexOf("GPUs (DCGM)")===0;})[0];while(h\&\&h.previousElementSibling)h.previousElementSibling.remove();})();</script></body></html>#' "$html" >"$gpus"
      gpng="$out/$name-gpus-$width.png"
      rm -f "$gpng"
      timeout 60 chromium "${flags[@]}" --window-size=$width,1400 --screenshot="$gpng" "file://$(realpath "$gpus")" 2>>"$log" || true
      if [ ! -s "$gpng" ]; then
        echo "$what: no screenshot of the GPU section at $gpng"; fail=1
      fi
    fi
    verdict=$(tr '\n' '\r' <<<"$dom" | grep -o 'RESULT_OF_HTML_CHECK: .* :RESULT_OF_HTML_CHECK' | tr '\r' '\n' || true)
    case "$verdict" in
      "RESULT_OF_HTML_CHECK: OK :RESULT_OF_HTML_CHECK") echo "$what: $(grep -o "<svg" <<<"$dom" | wc -l) charts, nothing clipped or overlapping, screenshot $png" ;;
      "") echo "$what: the layout check did not run"; fail=1 ;;
      *) echo "$what:"; sed 's/&quot;/"/g; s/&amp;/\&/g' <<<"$verdict"; fail=1 ;;
    esac
  done
done
if [ $fail -ne 0 ]; then
  exit 1
fi
