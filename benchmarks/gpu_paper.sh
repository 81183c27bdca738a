#!/usr/bin/env bash
# Every paper preset of every study on one accelerator: wall time and verdicts, one block per run.
#
#   bash benchmarks/gpu_paper.sh [OUT]         (default OUT: runs/gpu-paper)
#
# Prepared for a lent GPU machine (the device tool): it sets up its own virtual environment if
# none is there (the CPU wheel of torch works too, for a dry check), uses --device cuda when CUDA
# is present, runs the presets one after another (resumable: a rerun continues each run), and
# prints per preset its wall time and each claim's verdict, effect and interval. The presets
# that need files not shipped with the code (paper-mnist: the full MNIST) are skipped with a line.
# width-depth-init runs its whole paper preset (issue 54's GPU target: <= 10 min) and then each of
# its paper slices (the CPU-sized experiments, some of them outside the paper preset's grid).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/gpu-paper}
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/robustlab ]; then
  "$PY" -m venv .venv && .venv/bin/pip install -q torch && .venv/bin/pip install -q -e . || exit 1
fi
RL=.venv/bin/robustlab
DEVICE=cpu
.venv/bin/python -c "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)" && DEVICE=cuda
WORKERS=${WORKERS:-$([ "$DEVICE" = cuda ] && echo 1 || echo 2)}
mkdir -p "$OUT"
echo "device: $DEVICE  workers: $WORKERS  out: $OUT  ($(date -u +%FT%TZ))"

PRESETS=(
  "feature-learning paper"
  "lazy-attack paper"
  "lazy-attack paper-large-d"
  "lazy-adversarial paper"
  "width-depth-init paper"
  "width-depth-init paper-width-he"
  "width-depth-init paper-width-lecun"
  "width-depth-init paper-lazy-limit"
  "width-depth-init paper-alpha"
  "width-depth-init paper-width-n"
  "width-depth-init paper-depth"
  "width-depth-init paper-depth-lazy"
  "width-depth-init paper-nonlazy"
  "width-depth-init paper-kappa"
)
total0=$(date +%s)
for item in "${PRESETS[@]}"; do
  set -- $item
  study=$1 preset=$2 dir="$OUT/$study-$preset"
  t0=$(date +%s.%N)
  "$RL" run "$study" --preset "$preset" --device "$DEVICE" --workers "$WORKERS" --out "$dir" --quiet \
    >"$dir.log" 2>&1 || true
  t1=$(date +%s.%N)
  printf '\n== %s --preset %s: %.1f s (%s)\n' "$study" "$preset" "$(echo "$t1 - $t0" | bc)" "$dir"
  .venv/bin/python - "$dir" <<'PY'
import json, sys
from pathlib import Path
p = Path(sys.argv[1]) / "claims.json"
if not p.is_file():
    print("  no claims.json: see the log beside the run directory")
    sys.exit(0)
for c in json.loads(p.read_text()):
    iv = c.get("interval") or [None, None]
    eff = "" if c.get("effect") is None else f" {c['effect']:.3g}"
    iv = "" if None in iv else f" [{iv[0]:.3g}, {iv[1]:.3g}]"
    ctl = (c.get("control") or {}).get("verdict", "-")
    print(f"  {c['id']:<42} {c.get('kind', 'claim'):<12} {c['verdict']:<15}{eff}{iv}  control: {ctl}")
PY
done
echo; echo "all presets: $(( $(date +%s) - total0 )) s"
