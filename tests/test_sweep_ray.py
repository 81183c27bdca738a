"""The Ray backend on a real local Ray cluster (2 CPUs): the same results as the local one."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from robustlab import records
from robustlab.studies.base import execute, plan
from robustlab.studies.smoke import STUDY as SMOKE
from robustlab.sweep import backends
from robustlab.sweep.runner import SweepOptions
from robustlab.sweep.store import Store

pytestmark = [pytest.mark.ray, pytest.mark.slow]
ray = pytest.importorskip("ray")

# three groups of three seeds; the lr=0.5 group is forced to fail
GRID = ["lr=0.1,0.3,0.5"]
SETS = {"fail_on_lr": "0.5", "epochs": "40"}


@pytest.fixture(scope="module")
def cluster():
    opts = SweepOptions(backend="ray", ray_num_cpus=2, quiet=True)
    backends.prepare(opts)  # starts a local cluster with 2 CPUs
    assert ray.cluster_resources()["CPU"] == 2
    yield opts
    backends.ray_shutdown()


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("local") / "run"
    execute(plan(SMOKE, grids=GRID, sets=SETS, n_seeds=3), out, SweepOptions(quiet=True))
    return out


def table(out):
    with Store(out / "store.sqlite", readonly=True) as st:
        return st.table()


def test_ray_backend_gives_the_same_results_as_local(tmp_path, cluster, local_run):
    out = tmp_path / "ray"
    summary = execute(plan(SMOKE, grids=GRID, sets=SETS, n_seeds=3), out, cluster)
    assert (out / "results.jsonl").read_bytes() == (local_run / "results.jsonl").read_bytes()
    assert table(out) == table(local_run) and len(table(out)) == 9
    assert len(summary["failures"]) == 3
    assert all(f["reason"] == "RuntimeError: forced failure at lr=0.5" for f in summary["failures"])
    man = records.read_json(out / "manifest.json")
    assert man["backend"] == "ray" and man["sweep"]["groups"] == 3


def test_cli_joins_a_running_cluster_by_address(tmp_path, cluster, local_run):
    address = ray.get_runtime_context().gcs_address
    out = tmp_path / "joined"
    cmd = [sys.executable, "-m", "robustlab.cli", "run", "smoke", "--grid", *GRID, "--seeds", "3",
           "--set", "fail_on_lr=0.5", "--set", "epochs=40", "--quiet", "--backend", "ray",
           "--ray-address", address, "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr[-2000:]
    assert (out / "results.jsonl").read_bytes() == (local_run / "results.jsonl").read_bytes()
    assert table(out) == table(local_run)


def test_resuming_a_local_run_on_ray_runs_only_what_is_missing(tmp_path, cluster, local_run):
    out = tmp_path / "mixed"
    p = plan(SMOKE, grids=GRID, sets=SETS, n_seeds=3)
    execute(p, out, SweepOptions(quiet=True))
    with Store(out / "store.sqlite") as st:  # forget the lr=0.3 group
        st.conn.execute("DELETE FROM points WHERE json_extract(params, '$.lr') = 0.3")
    execute(p, out, cluster)
    assert records.read_json(out / "manifest.json")["sweep"]["ran"] == 3
    assert (out / "results.jsonl").read_bytes() == (local_run / "results.jsonl").read_bytes()
