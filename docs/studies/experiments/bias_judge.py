"""The registered decision for the bias test: per (seed, m), S = the log-log slope of |f|/||x|| on d
over the three largest d (196, 400, 784); Delta = mean S (no bias) - mean S (bias), 95 % bootstrap
interval over seeds (seed-level resampling, both widths kept together)."""
import collections
import json
import sys

import numpy as np

rs = [json.loads(l) for l in open(sys.argv[1] + "/results.jsonl")]
S = collections.defaultdict(dict)
for bias in (True, False):
    for m in (256, 1024):
        for s in sorted({r["seed"] for r in rs}):
            pts = sorted((r["d"], r["abs_f"] / r["x_norm"]) for r in rs
                         if r["bias"] == bias and r["m"] == m and r["seed"] == s and r["d"] >= 196)
            if len(pts) == 3:
                S[(bias, m)][s] = np.polyfit(np.log([p[0] for p in pts]), np.log([p[1] for p in pts]), 1)[0]
seeds = sorted(set.intersection(*[set(v) for v in S.values()]))
arr = {k: np.array([S[k][s] for s in seeds]) for k in S}
for k, v in sorted(arr.items()):
    print(f"bias={k[0]!s:5} m={k[1]:4}: mean S {v.mean():+.3f}, sd {v.std(ddof=1):.3f}, n {len(v)}")
on = (arr[(True, 256)] + arr[(True, 1024)]) / 2
off = (arr[(False, 256)] + arr[(False, 1024)]) / 2
delta = off.mean() - on.mean()
rng = np.random.default_rng(0)
boots = [off[i].mean() - on[i].mean() for i in (rng.integers(0, len(seeds), len(seeds)) for _ in range(10000))]
lo, hi = np.percentile(boots, [2.5, 97.5])
print(f"Delta = {delta:+.3f} [{lo:+.3f}, {hi:+.3f}]; bias-off mean S {off.mean():+.3f}, bias-on {on.mean():+.3f}")
if lo > 0 and off.mean() >= -0.05:
    print("supported: without biases |f|/||x|| falls less at large d")
elif hi < 0.05 and lo > -0.05 or hi <= 0:
    print("refuted: |f|/||x|| falls as much without biases")
else:
    print("inconclusive")
