"""The registered decision for the input-scale test: per seed, S = the log-log slope of |f|/||x||
on d over the three largest d (196, 400, 784); Delta = mean S (unit-mean) - mean S (raw), 95 %
bootstrap interval over seeds. The claim's own estimator for eta (Q = ||x||/eta = a*d^p + b) is
printed beside it, per arm, as a description."""
import collections
import json
import sys

import numpy as np
import pandas as pd

from robustlab.studies.lazy.attack_claims import _exponent

rs = [json.loads(line) for line in open(sys.argv[1] + "/results.jsonl")]
S = collections.defaultdict(dict)
for arm in ("none", "unit-mean"):
    for s in sorted({r["seed"] for r in rs}):
        pts = sorted((r["d"], r["abs_f"] / r["x_norm"]) for r in rs
                     if r.get("input_scale", "none") == arm and r["seed"] == s and r["d"] >= 196)
        if len(pts) == 3:
            S[arm][s] = np.polyfit(np.log([p[0] for p in pts]), np.log([p[1] for p in pts]), 1)[0]
seeds = sorted(set(S["none"]) & set(S["unit-mean"]))
raw = np.array([S["none"][s] for s in seeds])
scaled = np.array([S["unit-mean"][s] for s in seeds])
for name, v in (("raw", raw), ("unit-mean", scaled)):
    print(f"{name:9}: mean S {v.mean():+.3f}, sd {v.std(ddof=1):.3f}, n {len(v)}")
delta = scaled.mean() - raw.mean()
rng = np.random.default_rng(0)
boots = [scaled[i].mean() - raw[i].mean() for i in (rng.integers(0, len(seeds), len(seeds)) for _ in range(10000))]
lo, hi = np.percentile(boots, [2.5, 97.5])
print(f"Delta = {delta:+.3f} [{lo:+.3f}, {hi:+.3f}]; unit-mean mean S {scaled.mean():+.3f}, raw {raw.mean():+.3f}")
if lo > 0 and scaled.mean() >= -0.05:
    print("supported: at unit mean norm |f|/||x|| falls less at large d")
elif (hi < 0.05 and lo > -0.05) or hi <= 0:
    print("refuted: |f|/||x|| falls as much at unit mean norm")
else:
    print("inconclusive")
df = pd.DataFrame(rs)
df["eta_rel"] = df["eta"] / df["x_norm"]
for arm in ("none", "unit-mean"):
    est = _exponent(df[df["input_scale"].fillna("none") == arm], "eta_rel")
    print(f"{arm:9}: eta/||x|| exponent (the claim's estimator) {est.value:+.3f} [{est.low:+.3f}, {est.high:+.3f}]")
