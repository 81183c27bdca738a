"""Grid parsing, merging and expansion (sweep/grid.py) and planning a study's points."""

from __future__ import annotations

import dataclasses

import pytest

from robustlab.config import Config, ConfigError, UserError, config_hash, param
from robustlab.studies.base import plan
from robustlab.studies.smoke import STUDY as SMOKE
from robustlab.studies.smoke import SmokeConfig
from robustlab.sweep.grid import expand, merge, parse_grid_args


@dataclasses.dataclass(frozen=True)
class GridConfig(Config):
    study = "grid-test"
    lr: float = param(0.1, "a float", gt=0)
    width: int = param(8, "an int", ge=1)
    name: str = param("a", "a string")
    flag: bool = param(False, "a bool")
    widths: tuple[int, ...] = param((4, 4), "a tuple")
    cap: float | None = param(None, "an optional float")


def test_list_values_take_the_field_type():
    axes = parse_grid_args(["lr=0.1,0.5", "width=4,16", "name=x,y", "flag=true,0"], GridConfig)
    assert axes == {"lr": [0.1, 0.5], "width": [4, 16], "name": ["x", "y"], "flag": [True, False]}
    assert isinstance(axes["lr"][0], float) and isinstance(axes["width"][0], int)


def test_tuple_items_are_separated_by_semicolons():
    assert parse_grid_args(["widths=8;8,16;32"], GridConfig) == {"widths": [(8, 8), (16, 32)]}


def test_optional_field_accepts_none():
    assert parse_grid_args(["cap=none,1.5"], GridConfig) == {"cap": [None, 1.5]}


def test_linear_range_includes_both_ends():
    assert parse_grid_args(["lr=0.1:0.5:5"], GridConfig)["lr"] == [0.1, 0.2, 0.3, 0.4, 0.5]


@pytest.mark.parametrize("text", ["1e-3:1e-1:3log", "1e-3:1e-1:3:log"])
def test_log_range(text):
    assert parse_grid_args([f"lr={text}"], GridConfig)["lr"] == [0.001, 0.01, 0.1]


def test_integer_log_range_rounds_and_drops_repeats():
    # 1, 1.39, 1.93, 2.68, 3.73, 5.18, 7.20, 10 rounded: 1 and 1.39 collide
    vals = parse_grid_args(["width=1:10:8log"], GridConfig)["width"]
    assert vals == [1, 2, 3, 4, 5, 7, 10] and all(isinstance(v, int) for v in vals)


def test_single_point_range():
    assert parse_grid_args(["lr=0.3:0.9:1"], GridConfig)["lr"] == [0.3]


def test_a_colon_in_a_string_field_is_a_value_not_a_range():
    assert parse_grid_args(["name=a:b,c"], GridConfig) == {"name": ["a:b", "c"]}


@pytest.mark.parametrize("arg, needle", [
    ("lr", "expected key=v1,v2"),
    ("lr=", "empty"),
    ("lr=,", "empty"),
    ("lr=0.1:0.5", "lo:hi:n"),
    ("lr=0.1:0.5:3:4", "lo:hi:n"),
    ("lr=a:0.5:3", "numbers"),
    ("lr=0.1:0.5:x", "numbers"),
    ("lr=0.1:0.5:0", "n must be >= 1"),
    ("lr=0:1:3log", "log range"),
    ("lr=0.1:inf:3", "finite"),
    ("lr=abc", "expected a number"),
    ("width=1.5", "expected an integer"),
    ("flag=maybe", "true or false"),
])
def test_bad_syntax_is_a_user_error(arg, needle):
    with pytest.raises(UserError, match=needle):
        parse_grid_args([arg], GridConfig)


def test_unknown_key_names_the_known_ones():
    with pytest.raises(ConfigError, match="unknown key.*known keys: seed, lr"):
        parse_grid_args(["lrr=0.1"], GridConfig)


def test_an_axis_given_twice_is_an_error():
    with pytest.raises(UserError, match="twice"):
        parse_grid_args(["lr=0.1", "lr=0.2"], GridConfig)


def test_merge_replaces_axes_in_every_block_and_drops_fixed_fields():
    blocks = [{"lr": [0.1], "width": [4, 8]}, {"lr": [0.2], "name": ["q"]}]
    merged = merge(blocks, {"lr": [0.5, 0.7]}, fixed={"name"})
    assert merged == [{"lr": [0.5, 0.7], "width": [4, 8]}, {"lr": [0.5, 0.7]}]
    # identical blocks after merging collapse into one
    assert merge([{"lr": [0.1]}, {"lr": [0.2]}], {"lr": [0.3]}) == [{"lr": [0.3]}]


def test_expand_is_the_union_of_products_in_order():
    pts = list(expand([{"a": [1, 2], "b": ["x", "y"]}, {"a": [9]}]))
    assert pts == [{"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 2, "b": "x"}, {"a": 2, "b": "y"}, {"a": 9}]


def test_plan_crosses_the_grid_with_seeds_and_keys_each_point_by_its_config():
    p = plan(SMOKE, grids=["lr=0.1,0.5"], n_seeds=4)
    assert len(p.points) == 8
    assert all(isinstance(c, SmokeConfig) for c in p.points)
    assert [(c.lr, c.seed) for c in p.points[:5]] == [(0.1, 0), (0.1, 1), (0.1, 2), (0.1, 3), (0.5, 0)]
    keys = [config_hash(c.to_dict()) for c in p.points]
    assert len(set(keys)) == 8
    # the key is a function of the full config: same config, same key; one field differs, key differs
    assert keys[0] == config_hash(SmokeConfig(lr=0.1, seed=0).to_dict())
    assert keys[0] != config_hash(SmokeConfig(lr=0.1, seed=0, epochs=31).to_dict())


def test_plan_drops_duplicate_points_and_validates_every_one():
    assert len(plan(SMOKE, grids=["lr=0.1,0.1"], n_seeds=1).points) == 1
    with pytest.raises(ConfigError, match="lr"):
        plan(SMOKE, grids=["lr=0.1,-1"])
    with pytest.raises(ConfigError, match="size"):  # a cross-field rule, checked per point
        plan(SMOKE, grids=["size=4,9"])


def test_seed_can_be_an_axis():
    p = plan(SMOKE, grids=["seed=3:5:3"])
    assert sorted(c.seed for c in p.points) == [3, 4, 5]


def test_a_grid_block_can_carry_its_own_seed_count():
    from robustlab.studies.base import SEEDS_KEY, Preset

    study = dataclasses.replace(SMOKE, presets={"p": Preset({}, [{"lr": [0.1], SEEDS_KEY: [5]}, {"lr": [0.5]}],
                                                            n_seeds=2)})
    p = plan(study, preset="p", seed=10)
    assert sorted((c.lr, c.seed) for c in p.points) == [(0.1, s) for s in range(10, 15)] + [(0.5, 10), (0.5, 11)]
    assert all(SEEDS_KEY not in g for g in p.grid)  # the recorded grid is the resolved one
    # --seeds sets every block's count; a seed axis or a fixed seed replaces them
    assert sorted((c.lr, c.seed) for c in plan(study, preset="p", n_seeds=1).points) == [(0.1, 0), (0.5, 0)]
    assert len(plan(study, preset="p", grids=["seed=7"]).points) == 2
