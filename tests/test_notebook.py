"""robustlab in a Jupyter kernel: a run with the default options leaves the notebook's
matplotlib backend and rcParams as they were, and the next plotting cell still shows its
figure (inline); then a cell plots the run's results (run, then plot)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

SRC = str(Path(__file__).resolve().parents[1] / "src")

CELLS = [
    # the notebook's own state before robustlab: inline backend, a style of the user's own
    "import matplotlib\nimport matplotlib.pyplot as plt\n"
    "plt.rcParams['axes.grid'] = False\nplt.rcParams['font.size'] = 13\n"
    "backend0 = matplotlib.get_backend()\nrc0 = dict(matplotlib.rcParams)\nprint(backend0)",
    "import robustlab\n"
    "run = robustlab.run('smoke', grid={'lr': [0.1, 0.5]}, seeds=2, out={out!r}, quiet=True)\n"
    "assert len(run.figures) == 1 and run.claims['verdict'].notna().all()",
    # nothing changed: the backend, every rcParam (NaN-valued ones compare by identity)
    "assert matplotlib.get_backend() == backend0, (backend0, matplotlib.get_backend())\n"
    "changed = [k for k, v in rc0.items() if matplotlib.rcParams[k] != v and v == v]\n"
    "assert not changed, changed\n"
    "import sys\nprint('workers', run.manifest['workers'])",
    # run, then plot: the figure is shown inline (an image/png output)
    "curve = run.results.groupby(['lr', 'epoch'])['loss'].mean().reset_index()\n"
    "fig, ax = plt.subplots()\n"
    "for lr, sub in curve.groupby('lr'):\n    ax.plot(sub['epoch'], sub['loss'], label=f'lr={lr}')\n"
    "ax.legend()\nassert not ax.xaxis._major_tick_kw.get('gridOn', False)\nplt.show()",
]


def test_run_in_a_kernel_keeps_backend_and_rcparams_and_the_next_plot_shows(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel picks its own (inline)
    out = str(tmp_path / "smoke")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c.replace("{out!r}", repr(out)))
                                         for c in CELLS])
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    first = "".join(o.get("text", "") for o in nb.cells[0].outputs)
    assert "inline" in first, first
    workers = "".join(o.get("text", "") for o in nb.cells[2].outputs)
    assert "workers" in workers  # the default (cores // threads) ran, however many that was
    shown = [o for o in nb.cells[3].outputs if o.get("output_type") == "display_data"]
    assert any("image/png" in o.get("data", {}) for o in shown), nb.cells[3].outputs
