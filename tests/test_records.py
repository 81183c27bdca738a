import json
import multiprocessing as mp
import os
import signal
import time

import pytest

from robustlab import records


def test_atomic_write_replaces_whole_file(tmp_path):
    p = tmp_path / "a.json"
    records.write_json(p, {"x": 1})
    records.write_json(p, {"x": 2, "nan": float("nan")})
    assert json.loads(p.read_text()) == {"x": 2, "nan": None}
    assert [f.name for f in tmp_path.iterdir()] == ["a.json"]  # no temp files left


def test_failed_write_leaves_old_content(tmp_path):
    p = tmp_path / "a.txt"
    records.atomic_write_text(p, "old")

    class Boom:
        def __bytes__(self):
            raise RuntimeError

    with pytest.raises(TypeError):
        records.atomic_write_bytes(p, Boom())  # type: ignore[arg-type]
    assert p.read_text() == "old"
    assert [f.name for f in tmp_path.iterdir()] == ["a.txt"]


def _writer(path: str) -> None:
    big = "x" * 5_000_000
    i = 0
    while True:
        records.atomic_write_text(path, f"{i}:{big}")
        i += 1


def test_killed_writer_never_leaves_a_torn_file(tmp_path):
    p = tmp_path / "big.txt"
    records.atomic_write_text(p, "0:" + "x" * 5_000_000)
    proc = mp.get_context("spawn").Process(target=_writer, args=(str(p),))
    proc.start()
    time.sleep(1.5)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    text = p.read_text()
    head, body = text.split(":", 1)
    assert head.isdigit() and len(body) == 5_000_000


def test_jsonl_roundtrip(tmp_path):
    rows = [{"a": 1, "b": [1.5, None]}, {"a": 2, "b": []}]
    records.write_jsonl(tmp_path / "r.jsonl", rows)
    assert records.read_jsonl(tmp_path / "r.jsonl") == rows


def test_manifest_helpers():
    v = records.package_versions()
    assert v["torch"] and v["numpy"] and v["python"]
    assert "git_commit" in records.code_version()
    assert records.host_info()["cpu_count"] >= 1


def test_dumps_fast_path_writes_the_text_of_the_cleaning_walk():
    """dumps skips the _clean walk when json accepts the object as it is: the text must be the
    walk's, for plain rows and for everything the walk changes (NaN/inf, numpy and torch values,
    tuples, keys json converts itself and keys it refuses)."""
    import json

    import numpy as np
    import torch

    from robustlab.records import _clean, dumps

    cases = [
        {"a": 1.0, "b": [1, 2, (3, 4)], "c": None, "d": "text", "e": True},
        {"x": float("nan"), "y": [float("inf"), float("-inf")]},
        {"np32": np.float32(0.5), "np64": np.float64(0.1), "i64": np.int64(3), "arr": np.arange(3)},
        {"t": torch.tensor([1.0, float("inf")]), "s": torch.tensor(2.5)},
        {7: "int key", 2.5: "float key", True: "bool key", None: "none key"},
        {(1, 2): "tuple key"},
        [{"k": 1e300, "nested": {"deep": [float("nan"), 1]}}],
    ]
    for obj in cases:
        for kw in ({}, {"sort_keys": False}, {"indent": 2}):
            assert dumps(obj, **kw) == json.dumps(_clean(obj), allow_nan=False, **kw)
    assert dumps({"v": float("nan")}) == '{"v": null}'
    assert dumps({True: 1, None: 2}) == '{"true": 1, "null": 2}'
