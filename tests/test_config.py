import dataclasses

import pytest

from robustlab.config import Config, ConfigError, apply_overrides, config_hash, param, parse_value
from robustlab.studies.smoke import SmokeConfig


@dataclasses.dataclass(frozen=True)
class Demo(Config):
    study = "demo"
    lr: float = param(0.1, "learning rate", gt=0)
    n: int = param(3, "count", ge=1, le=10)
    act: str = param("relu", "activation", choices=("relu", "gelu"))
    widths: tuple[int, ...] = param((4, 8), "widths", ge=1)
    cap: float | None = param(None, "optional cap", gt=0)
    flag: bool = param(False, "a switch")

    def check(self):
        if self.n > 5 and self.act == "gelu":
            raise ConfigError("n", self.n, "<= 5 with act=gelu")


def test_defaults_are_valid_and_frozen():
    c = Demo()
    assert c.lr == 0.1 and c.widths == (4, 8)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.lr = 1.0  # type: ignore[misc]


@pytest.mark.parametrize("changes, field", [
    ({"lr": -1.0}, "lr"), ({"lr": 0.0}, "lr"), ({"n": 0}, "n"), ({"n": 11}, "n"),
    ({"act": "tanh"}, "act"), ({"widths": (4, 0)}, "widths"), ({"cap": -1.0}, "cap"),
    ({"lr": "abc"}, "lr"), ({"n": 2.5}, "n"), ({"flag": "yes"}, "flag"), ({"lr": float("nan")}, "lr"),
    ({"n": 6, "act": "gelu"}, "n"),
])
def test_bad_values_name_the_field(changes, field):
    with pytest.raises(ConfigError) as info:
        Demo(**changes)
    assert info.value.field == field
    msg = str(info.value)
    assert msg.startswith(f"{field}=") and "not allowed" in msg and "\n" not in msg


def test_overrides_convert_types():
    c = apply_overrides(Demo(), {"lr": "0.5", "n": "4", "act": "gelu", "widths": "1,2,3",
                                 "cap": "none", "flag": "true"})
    assert (c.lr, c.n, c.act, c.widths, c.cap, c.flag) == (0.5, 4, "gelu", (1, 2, 3), None, True)
    assert isinstance(c.lr, float) and isinstance(c.n, int)


@pytest.mark.parametrize("key, text", [("lr", "abc"), ("n", "2.5"), ("flag", "maybe"), ("bogus", "1")])
def test_override_errors(key, text):
    with pytest.raises(ConfigError) as info:
        apply_overrides(Demo(), {key: text})
    assert info.value.field == key


def test_unknown_key_lists_known_keys():
    with pytest.raises(ConfigError, match="known keys: seed, lr"):
        Demo().replace(bogus=1)


def test_int_accepts_integral_float_text():
    assert parse_value(int, "1e3", "n") == 1000


def test_config_hash_stable_and_sensitive():
    a, b = SmokeConfig().to_dict(), SmokeConfig(lr=0.25).to_dict()
    assert config_hash(a) == config_hash(dict(reversed(list(a.items()))))
    assert config_hash(a) != config_hash(b)


def test_describe_lists_every_field():
    names = [d[0] for d in Demo.describe()]
    assert names == Demo.field_names()
    assert any("> 0" in d[3] for d in Demo.describe() if d[0] == "lr")


@dataclasses.dataclass(frozen=True)
class Later(Demo):
    study = "demo"
    extra: int = param(0, "a field added after runs were stored", ge=0, since="test")


def test_a_field_marked_since_stays_out_of_the_key_at_its_default():
    # the point a run stored before `extra` existed keeps its key; any other value of it is a new point
    old = Demo(lr=0.2)
    assert Later(lr=0.2).key() == old.key() == config_hash(old.to_dict())
    assert "extra" in Later(lr=0.2).to_dict() and "extra" not in Later(lr=0.2).key_dict()
    assert Later(lr=0.2, extra=3).key() != old.key()
    assert Later(lr=0.2, extra=3).key() == config_hash(Later(lr=0.2, extra=3).to_dict())
    # a field without `since` is always in the key, at its default too
    assert Demo().key_dict() == Demo().to_dict()
