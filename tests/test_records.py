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
