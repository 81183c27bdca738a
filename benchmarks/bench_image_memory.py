"""Memory and time of the image passes that exceed ``IMAGE_CHUNK`` images per seed (the full
MNIST's evaluations and Ilyas pass), with their big blocks mapped (the code) against the
retained heap every sweep worker otherwise runs on (:func:`robustlab.utils.retain_freed_memory`).

Each arm is its own process (the allocator's settings are per process): an E-seed SmallCNN
trains one epoch on ``--train`` images, then PGD-evaluates ``--test`` images (4,000 per seed
a chunk), ``--rounds`` times; a thread samples the process's RSS every 0.2 s. On the retained
heap each pass's blocks fragment it and the peak climbs round after round; mapped, the peak
stays flat and each big block faults in anew. Both arms print the same robust accuracies
(checked: no arithmetic differs).

Run: ``python benchmarks/bench_image_memory.py`` (random 28×28 images; ``--data-dir DIR``
reads the full MNIST from ``DIR/mnist.pkl.gz`` instead). Linux, CPU, one thread; a few minutes at
the defaults (E 5, 3 rounds). Wall times of each arm's rounds (the other arm is not running
beside it, but the machine may be shared: the load average is printed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time


def arm(mode: str, E: int, rounds: int, n_train: int, n_test: int, data_dir: str) -> dict:
    import contextlib

    import torch

    import robustlab.train.images as im
    from robustlab.models.small_cnn import SmallCNN
    from robustlab.utils import retain_freed_memory

    if mode == "retained":
        im.large_blocks_mapped = contextlib.nullcontext
    retain_freed_memory()
    page = os.sysconf("SC_PAGE_SIZE")
    peak = [0.0]

    def watch():  # the resident set, from /proc (Linux)
        while True:
            with open("/proc/self/statm") as f:
                peak[0] = max(peak[0], int(f.read().split()[1]) * page / 1e9)
            time.sleep(0.2)

    threading.Thread(target=watch, daemon=True).start()
    if data_dir:
        from robustlab.data import load_images

        d = load_images("mnist", max_train=n_train, max_test=n_test, data_dir=data_dir)
        x, y, xt, yt = d.x_train, d.y_train, d.x_test, d.y_test
    else:
        g = torch.Generator().manual_seed(0)
        x, y = torch.rand(n_train, 1, 28, 28, generator=g), torch.randint(0, 10, (n_train,), generator=g)
        xt, yt = torch.rand(n_test, 1, 28, 28, generator=g), torch.randint(0, 10, (n_test,), generator=g)
    model = SmallCNN(E, 1, 10, width=8, generators=[torch.Generator().manual_seed(s) for s in range(E)])
    spec = im.ImageTrainSpec(method="standard", epochs=1, lr=0.1, batch_size=32, eps=0.1, final_pgd_steps=0)
    attack = spec.pgd(steps=spec.eval_pgd_steps)
    out = {"mode": mode, "peaks": [], "seconds": [], "robust": []}
    for i in range(rounds):
        t0 = time.perf_counter()
        im.train_images(model, x, y, xt[:100], yt[:100], spec, batch_generator=torch.Generator().manual_seed(i))
        _, r = im.evaluate_images(model, xt, yt, attack, torch.Generator().manual_seed(i))
        time.sleep(0.3)  # one more RSS sample
        out["seconds"].append(time.perf_counter() - t0)
        out["peaks"].append(peak[0])
        out["robust"].append([round(float(v), 6) for v in r])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=5, help="ensemble members E (default 5, the paper-mnist preset's)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--train", type=int, default=6000, help="training images per epoch (default 6000)")
    ap.add_argument("--test", type=int, default=10000, help="evaluated images (default 10,000, the full test set)")
    ap.add_argument("--data-dir", default="", help="folder holding mnist.pkl.gz (default: random images)")
    ap.add_argument("--arm", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.arm:
        print(json.dumps(arm(a.arm, a.seeds, a.rounds, a.train, a.test, a.data_dir)))
        return
    env = dict(os.environ, OMP_NUM_THREADS="1")
    res = {}
    for mode in ("retained", "mapped"):
        cmd = [sys.executable, __file__, "--arm", mode, "--seeds", str(a.seeds), "--rounds", str(a.rounds),
               "--train", str(a.train), "--test", str(a.test), "--data-dir", a.data_dir]
        res[mode] = json.loads(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout)
    r, m = res["retained"], res["mapped"]
    print(f"E {a.seeds}, {a.test} test images a pass, {a.rounds} rounds of an epoch ({a.train} images) and an "
          f"evaluation; load average {os.getloadavg()[0]:.2f}")
    print(f"{'round':>5} {'retained GB':>12} {'mapped GB':>10} {'retained s':>11} {'mapped s':>9}")
    for i in range(a.rounds):
        print(f"{i + 1:>5} {r['peaks'][i]:>12.2f} {m['peaks'][i]:>10.2f} {r['seconds'][i]:>11.1f} {m['seconds'][i]:>9.1f}")
    print(f"peak after the last round: retained/mapped {r['peaks'][-1] / m['peaks'][-1]:.2f}x; "
          f"time mapped/retained {sum(m['seconds']) / sum(r['seconds']):.2f}x; "
          f"robust accuracies equal: {r['robust'] == m['robust']}")


if __name__ == "__main__":
    main()
