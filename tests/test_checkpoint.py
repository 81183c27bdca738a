"""Group checkpoints (sweep/checkpoint.py): where they live, what reads back, and that a
save that fails is a warning, not a failed group. The resume itself: tests/test_width_depth_train.py
and tests/test_width_depth_study.py."""

from __future__ import annotations

import pytest
import torch

from robustlab.studies.smoke import SmokeConfig
from robustlab.sweep import checkpoint


def test_a_group_has_a_checkpoint_only_inside_a_run_folder(tmp_path):
    cfgs = [SmokeConfig(seed=s) for s in range(3)]
    assert checkpoint.for_group(cfgs) is None  # outside a sweep (an API call, a Ray task)
    with checkpoint.folder(tmp_path / "checkpoints"):
        ck = checkpoint.for_group(cfgs)
        other = checkpoint.for_group(cfgs[:2])
        with checkpoint.folder(None):
            assert checkpoint.for_group(cfgs) is None
    assert checkpoint.for_group(cfgs) is None
    assert ck.path.parent == tmp_path / "checkpoints" and ck.path != other.path
    assert ck.load() is None and not ck.path.parent.exists()  # nothing saved, nothing made


def test_a_saved_state_reads_back_only_for_its_own_points(tmp_path):
    cfgs = [SmokeConfig(seed=s) for s in range(2)]
    with checkpoint.folder(tmp_path):
        ck = checkpoint.for_group(cfgs, every_s=3600)
    assert not ck.due()
    state = {"epoch": 3, "w": torch.arange(6.0).view(2, 3), "lrs": [0.1, 0.1, 0.1], "sel": None}
    ck.save(state)
    got = ck.load()
    assert got["epoch"] == 3 and torch.equal(got["w"], state["w"]) and got["lrs"] == state["lrs"]
    assert checkpoint.Checkpoint(ck.path, ["another"]).load() is None  # another group's keys
    ck.path.write_bytes(b"not a checkpoint")
    assert ck.load() is None
    ck.save(state, progress="he depth 8 width 4096 epoch 3/50")
    (tmp_path / "junk.json").write_text("{not json")
    assert checkpoint.progress_of(tmp_path) == ["he depth 8 width 4096 epoch 3/50"]  # the junk skipped
    left = ck.path.with_name(f".{ck.path.name}.0123456789abcdef.tmp")  # a save killed half-way
    left.write_bytes(b"a save killed half-way")
    ck.clear()
    assert not ck.path.exists() and not left.exists() and not ck._note.exists()
    assert checkpoint.progress_of(tmp_path) == [] and checkpoint.progress_of(tmp_path / "none") == []


def test_a_save_that_fails_warns_once_and_the_group_goes_on(tmp_path):
    blocker = tmp_path / "checkpoints"
    blocker.write_text("a file where the folder should be")
    with checkpoint.folder(blocker):
        ck = checkpoint.for_group([SmokeConfig(seed=0)], every_s=0.0)
    assert ck.due()
    with pytest.warns(RuntimeWarning, match="could not save a training checkpoint"):
        ck.save({"epoch": 1})
    assert not ck.due()  # no more tries for this group
    ck.save({"epoch": 2})  # and no second warning
    assert ck.load() is None
