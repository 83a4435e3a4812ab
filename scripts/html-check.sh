#!/usr/bin/env bash
# Opens the HTML report of the golden fixture in headless Chromium: it must
# render, log no console errors, and leave a screenshot.
#
#   scripts/html-check.sh [report.html] [screenshot.png]
#
# Needs Debian's chromium (apt-get install chromium); .ci/run installs it.
set -euo pipefail
cd "$(dirname "$0")/.."
html=${1:-target/html-check/report.html}
png=${2:-target/html-check/report.png}
mkdir -p "$(dirname "$html")" "$(dirname "$png")"
if [ -z "${1:-}" ]; then
  cargo run --quiet --locked -- report tests/fixtures/report.json --format html --out "$html" >/dev/null
fi
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
       --disable-background-networking --disable-component-update --disable-sync
       --user-data-dir="$profile" --enable-logging=stderr --v=0)
url="file://$(realpath "$html")"
log=$(mktemp)
timeout 60 chromium "${flags[@]}" --window-size=1280,2400 --screenshot="$png" "$url" 2>"$log" || true
dom=$(timeout 60 chromium "${flags[@]}" --dump-dom "$url" 2>>"$log" || true)

fail=0
if [ ! -s "$png" ] || [ "$(stat -c %s "$png")" -lt 20000 ]; then
  echo "html-check: no usable screenshot at $png"; fail=1
fi
if ! grep -q "<svg" <<<"$dom"; then
  echo "html-check: the page did not render its charts"; fail=1
fi
if grep -E "CONSOLE|Uncaught|SyntaxError" "$log" | grep -v "Fontconfig" ; then
  echo "html-check: the page logged console errors"; fail=1
fi
if [ $fail -ne 0 ]; then
  echo "--- chromium log"; tail -20 "$log"; exit 1
fi
echo "html-check: rendered $(grep -o "<svg" <<<"$dom" | wc -l) charts, no console errors, screenshot $png"
