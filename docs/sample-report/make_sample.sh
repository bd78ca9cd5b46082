#!/usr/bin/env bash
# Recreates docs/sample-report: two nights of sample.toml (the second with a
# gemm that loses precision), the report of the second against the first, the
# Markdown excerpt and a screenshot of the HTML in headless Chromium.
# Run from the repository root after `make setup`: docs/sample-report/make_sample.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
work="$(mktemp -d)"
cp "$here/sample.toml" "$here/sample_kernels.py" "$work/"
sed 's/^# impl = /impl = /' "$here/sample.toml" > "$work/buggy.toml"
cd "$work"
export PYTHONPATH="$repo:$work${PYTHONPATH:+:$PYTHONPATH}"
python="$repo/.venv/bin/python"
"$python" -m e2egen nightly -c sample.toml --out e2e --store results/e2e.sqlite --seed 20250113 --workers 2 --no-report --no-progress
"$python" -m e2egen nightly -c buggy.toml --out e2e --store results/e2e.sqlite --seed 20250114 --workers 2 --no-report --no-progress || true
"$python" -m e2egen report --store results/e2e.sqlite --out reports
html="$(ls reports/*.html)"
# The excerpt: everything up to the aggregate tables by dtype.
awk '/^### By direction/ {exit} {print}' reports/*.md > "$here/report-excerpt.md"
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
  --disable-component-update --disable-sync --user-data-dir="$(mktemp -d)" --window-size=1440,2300 \
  --screenshot="$here/report.png" "file://$work/$html"
# A palette PNG is a third of the size and reads the same.
"$python" -c "from PIL import Image; im = Image.open('$here/report.png').convert('RGB'); im.quantize(256).save('$here/report.png', optimize=True)"
echo "wrote $here/report-excerpt.md and $here/report.png (from $work/$html)"
