#!/usr/bin/env bash
# Recreates docs/sample-report: two nights of sample.toml (the second with a
# gemm that loses precision), the report of the second against the first, the
# Markdown excerpt and a screenshot of the HTML in headless Chromium.
# Run from the repository root after `make setup`: docs/sample-report/make_sample.sh
# Needs: Chromium or Chrome (for the screenshot; CHROMIUM=/path/to/it to choose one)
# and the project's .venv (PYTHON=/path/to/python to use another interpreter with e2egen).
# The tracked files (report-excerpt.md, report.png) are replaced only once everything succeeded.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

browser="${CHROMIUM:-}"
if [ -z "$browser" ]; then
  for name in chromium chromium-browser google-chrome google-chrome-stable chrome; do
    if command -v "$name" >/dev/null 2>&1; then browser="$(command -v "$name")"; break; fi
  done
fi
if [ -z "$browser" ] || ! command -v "$browser" >/dev/null 2>&1; then
  echo "make_sample.sh: needs headless Chromium or Chrome for the screenshot, and found none" \
       "(tried \$CHROMIUM, chromium, chromium-browser, google-chrome, google-chrome-stable, chrome)." >&2
  echo "Install one (e.g. apt install chromium) or set CHROMIUM=/path/to/chrome; nothing was changed." >&2
  exit 2
fi
python="${PYTHON:-$repo/.venv/bin/python}"
if ! "$python" -c "import e2egen, PIL" 2>/dev/null; then
  echo "make_sample.sh: $python cannot import e2egen and PIL: run \`make setup\` first, or set PYTHON; nothing was changed." >&2
  exit 2
fi

work="$(mktemp -d)"
cp "$here/sample.toml" "$here/sample_kernels.py" "$work/"
sed 's/^# impl = /impl = /' "$here/sample.toml" > "$work/buggy.toml"
cd "$work"
export PYTHONPATH="$repo:$work${PYTHONPATH:+:$PYTHONPATH}"
"$python" -m e2egen nightly -c sample.toml --out e2e --store results/e2e.sqlite --seed 20250113 --workers 2 --no-report --no-progress
"$python" -m e2egen nightly -c buggy.toml --out e2e --store results/e2e.sqlite --seed 20250114 --workers 2 --no-report --no-progress || true
"$python" -m e2egen report --store results/e2e.sqlite --out reports
html="$(ls reports/*.html)"
# The excerpt: everything up to the aggregate tables by dtype.
awk '/^### By direction/ {exit} {print}' reports/*.md > "$work/report-excerpt.md"
"$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
  --disable-component-update --disable-sync --user-data-dir="$(mktemp -d)" --window-size=1440,2300 \
  --screenshot="$work/report.png" "file://$work/$html"
# A palette PNG is a third of the size and reads the same.
"$python" -c "from PIL import Image; im = Image.open('$work/report.png').convert('RGB'); im.quantize(256).save('$work/report.png', optimize=True)"
# Everything succeeded: only now replace the tracked files.
mv "$work/report-excerpt.md" "$here/report-excerpt.md"
mv "$work/report.png" "$here/report.png"
echo "wrote $here/report-excerpt.md and $here/report.png (from $work/$html)"
