"""What a study is, and how one is run into a run directory.

A study is a config class (one *point* of its grid: scalars only), named presets (base
values, a default grid and a number of seeds), and three functions:

* ``run_points(cfgs, device) -> list[list[dict] | Exception]`` — runs a group of points.
  For an ensemble study the group holds configs that differ only in ``seed`` (trained in
  one batched pass); otherwise it holds a single config. It returns, per config, its
  result rows (JSON-able dicts) or the exception that made that point fail.
* ``claims(df, ctx) -> list[Claim]`` — checks the paper's claims on the results table.
* ``figures(df, ctx) -> list[Figure]`` — draws figures into ``ctx.figdir``.

:func:`execute` validates everything, then creates the run directory, runs the sweep into
its store, and calls :func:`finalize`, which (re)builds results.jsonl, claims.json, the
figures and report.html from the store alone — ``robustlab report DIR`` calls only that.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import os
import shutil
import tempfile
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from .. import claims as claimsmod
from .. import records, stats
from ..config import Config, ConfigError, UserError, apply_overrides, did_you_mean
from ..report import html as report_html
from ..stats import Verdict
from ..sweep import backends as sweep_backends
from ..sweep import grid as gridmod
from ..sweep import lock as runlock
from ..sweep.runner import Sigint, SweepOptions, run_sweep, study_code
from ..sweep.store import Store
from . import integrity

__all__ = ["check_run_dir", "check_reuse", "Study", "Preset", "Claim", "Figure", "Context", "Plan", "plan", "plan_from_manifest",
           "execute", "finalize", "load", "PartialRunWarning"]


SEEDS_KEY = "n_seeds"  # a grid block's own number of seeds (see Preset)
# the most points a plan may hold unless raised (``--max-points``): checked before the grid is
# expanded, so a mistyped range is one line, not gigabytes and a MemoryError
MAX_POINTS = 100_000


@dataclasses.dataclass(frozen=True)
class Preset:
    """Named settings: base field values, the default grid and the number of seeds.

    A grid block may carry its own seed count under :data:`SEEDS_KEY` (``{"experiment":
    ["main"], SEEDS_KEY: [10]}``): a claim resting on a cheap experiment can have the seeds
    its power estimate asks for without multiplying the cost of the others. ``--seeds`` on
    the command line sets every block's count.
    """

    overrides: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    grid: Sequence[Mapping[str, Sequence[Any]]] = ({},)
    n_seeds: int = 1
    description: str = ""
    # claims this preset's scale cannot decide, {claim id: why}: a verdict measured to change
    # between base seeds (``reproduce --replicate``) is a draw, so at this preset such a claim
    # reads inconclusive and says why (its verdict before the cap is kept in its evidence)
    undecided: Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Claim:
    """A checked claim: its verdict (see :mod:`robustlab.stats`) with the numbers it rests on.

    ``verdict`` is a :class:`~robustlab.stats.Verdict` (effect, interval, threshold, seeds
    needed, conditions); a bare verdict name or a bool (the old pass/fail: ``True`` is
    reproduced, ``False`` contradicted) is accepted and turned into one. ``passed`` is true
    only for a reproduced claim.

    The claims engine (:mod:`robustlab.claims`): ``kind`` is ``claim``, ``self-check`` or
    ``exploratory``; ``control`` the claim's own rule on runs where the effect must be absent
    (:func:`robustlab.claims.judge`). A reproduced claim stands only beside a working control
    (one that reads contradicted under that rule); otherwise it turns inconclusive here, so no
    study can forget it, and the verdict before that is kept in ``verdict_before_control``. An
    exploratory reading obeys the same rule when it declares a control; ``excluded``
    the points each premise removed; ``across`` the verdict at every value of a knob the paper
    leaves open; ``variants`` other protocols reported beside the main one (never substituted
    into it).
    """

    id: str
    statement: str
    verdict: Verdict | str | bool
    evidence: dict[str, Any]
    source: str = ""
    kind: str = claimsmod.CLAIM
    control: claimsmod.Control | None = None
    excluded: Sequence[claimsmod.Exclusion] = ()
    across: Mapping[str, Mapping[str, str]] | None = None
    variants: Mapping[str, Verdict] | None = None
    verdict_before_control: str = dataclasses.field(init=False, default="", compare=False)
    # the verdict as the study decided it, before the control rule (re-kinding starts from it)
    raw_verdict: Verdict | None = dataclasses.field(init=False, default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        v = self.verdict
        if isinstance(v, bool):
            v = Verdict(stats.REPRODUCED if v else stats.CONTRADICTED, reason="pass/fail check (no interval)")
        elif isinstance(v, str):
            v = Verdict(v)
        elif not isinstance(v, Verdict):
            raise TypeError(f"claim {self.id!r}: verdict must be a Verdict, a verdict name or a bool, "
                            f"got {type(v).__name__}")
        if self.kind not in claimsmod.KINDS:
            raise ValueError(f"claim {self.id!r}: kind={self.kind!r}: one of {', '.join(claimsmod.KINDS)}")
        object.__setattr__(self, "excluded", tuple(self.excluded))
        object.__setattr__(self, "verdict_before_control", v.verdict)
        object.__setattr__(self, "raw_verdict", v)
        if self.kind != claimsmod.SELF_CHECK:  # a self-check is an invariant: no control rule
            # a paper's claim needs a working control to read reproduced; an exploratory
            # reading is held to the rule only when it declares a control
            v = claimsmod.with_control(v, self.control, required=self.kind == claimsmod.CLAIM)
        object.__setattr__(self, "verdict", v)

    @property
    def decision(self) -> Verdict:
        return self.verdict  # type: ignore[return-value]

    @property
    def passed(self) -> bool:
        return self.decision.passed

    def to_dict(self) -> dict[str, Any]:
        d = {"id": self.id, "kind": self.kind, "statement": self.statement, **self.decision.to_dict(),
             "passed": self.passed,
             "control": None if self.control is None else self.control.to_dict(),
             "excluded": [e.to_dict() for e in self.excluded],
             "across": None if self.across is None else {k: dict(v) for k, v in self.across.items()},
             "evidence": self.evidence, "source": self.source}
        if self.kind == claimsmod.CLAIM and self.control is None:
            d["fail_check"] = claimsmod.NO_CONTROL
        if self.verdict_before_control != self.decision.verdict:
            d["verdict_before_control"] = self.verdict_before_control
        if self.variants:
            d["variants"] = {k: v.to_dict() for k, v in self.variants.items()}
        return d


@dataclasses.dataclass(frozen=True)
class Figure:
    file: str  # relative to the run directory, e.g. "figures/grad_norm.png"
    title: str
    caption: str  # what the reader should see


@dataclasses.dataclass(frozen=True)
class Context:
    """What claims and figures see besides the results table."""

    out: Path
    figdir: Path
    manifest: dict[str, Any]
    failures: list[dict[str, Any]]

    @property
    def base_config(self) -> dict[str, Any]:
        return self.manifest["base_config"]


@dataclasses.dataclass(frozen=True)
class Study:
    name: str
    title: str
    source: str
    summary: str
    config: type[Config]
    presets: Mapping[str, Preset]
    run_points: Callable[[list[Config], str], list[Any]]
    claims: Callable[[pd.DataFrame, Context], list[Claim]]
    figures: Callable[[pd.DataFrame, Context], list[Figure]]
    ensemble: bool = False
    max_ensemble: int = 64
    # the arithmetic of one point in FLOPs (its training's matrix products), where the study
    # can count it; None when it cannot. ``--dry-run`` then weights its estimate by it and
    # states the floor the machine's matmul rate puts under the whole run.
    cost: Callable[[Config], float | None] | None = None
    # a point's relative cost (any unit), only to start the costliest groups first when
    # several workers share a run (their order does not change the results); where it is
    # None, ``cost`` serves, and with neither the groups run in the plan's order
    weight: Callable[[Config], float | None] | None = None
    # with ``cost``: ``probe(point, steps)``, the point's training cut short to ``steps``
    # steps with the same products per step (and its measurements made small), its FLOPs
    # counted by ``cost`` too. ``--dry-run`` times it at two lengths in place of a group too
    # costly to run whole, which gives this machine's time per FLOP at the shapes of the
    # run's costliest groups (the cheaper groups' small products run far slower); None:
    # those groups take the cheaper ones' time per FLOP. With ``weight`` instead: a smaller
    # point whose ``weight`` counts it, with the same mix of work per unit of weight; a
    # probe may return None for a point it does not cut short (that group runs whole)
    probe: Callable[[Config, int], Config | None] | None = None
    # where the study comes from, set by the loader (see studies/external.py); None: built-in
    origin: Mapping[str, Any] | None = dataclasses.field(default=None, compare=False)
    # the claims it checks, declared before any run (kind, premises by name, control setting),
    # and the premises those names refer to: see robustlab.claims. Checked at construction, so
    # a misspelt premise or a control outside every preset fails when the study is loaded.
    claim_specs: Sequence[claimsmod.ClaimSpec] = ()
    premises: Mapping[str, claimsmod.Premise] = dataclasses.field(default_factory=dict)
    # populations of runs measured inside every point that a control may name by a string
    # ({"at-init": "the same networks before any training step"}): a control is the claim's
    # own rule on other runs, so a string naming anything else is refused at load
    populations: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        integrity.check_study_name(self.name)  # it names directories
        fields = [f.name for f in dataclasses.fields(self.config)] if dataclasses.is_dataclass(self.config) else []
        defaults = {}
        if dataclasses.is_dataclass(self.config):
            for f in dataclasses.fields(self.config):
                if f.default is not dataclasses.MISSING:
                    defaults[f.name] = f.default
        problems = claimsmod.validate_specs(self.name, list(self.claim_specs), dict(self.premises),
                                            self.presets, fields, defaults, dict(self.populations))
        ids = {s.id for s in self.claim_specs}
        for pname, pre in self.presets.items():
            for cid in getattr(pre, "undecided", None) or {}:
                if ids and cid not in ids:
                    problems.append(f"study {self.name!r}, preset {pname!r}: undecided claim {cid!r} is not declared")
        if problems:
            raise UserError(problems[0])

    def spec(self, claim_id: str) -> claimsmod.ClaimSpec | None:
        """The declaration of one claim (None: the study did not declare it)."""
        for s in self.claim_specs:
            if s.id == claim_id:
                return s
        return None

    def describe(self) -> str:
        return self.summary


# ----------------------------------------------------------------------------------------
# planning: base config + grid -> list of point configs (validated before anything is written)

@dataclasses.dataclass(frozen=True)
class Plan:
    study: Study
    preset: str
    base: Config
    grid: list[dict[str, list[Any]]]
    points: list[Config]
    seeds: list[int]
    request: dict[str, Any] = dataclasses.field(default_factory=dict)


def plan(
    study: Study,
    *,
    preset: str = "quick",
    sets: Mapping[str, str] | None = None,
    grids: Sequence[str] = (),
    seed: int | None = None,
    n_seeds: int | None = None,
    max_points: int | None = MAX_POINTS,
) -> Plan:
    """Resolve preset, ``--set`` and ``--grid`` into the validated list of point configs.

    ``max_points``: refuse a plan of more points (counted before the grid is expanded; None: no cap).
    """
    if preset not in study.presets:
        raise UserError(f"preset={preset!r} is not allowed for {study.name}{did_you_mean(preset, list(study.presets))}: "
                        f"one of {', '.join(study.presets)}")
    pre = study.presets[preset]
    sets = dict(sets or {})
    base = study.config().replace(**dict(pre.overrides))
    base = apply_overrides(base, sets)
    base_seed = base.seed if seed is None else seed
    if base_seed < 0:
        raise ConfigError("seed", base_seed, "a value >= 0")
    base = base.replace(seed=base_seed)
    if n_seeds is not None and n_seeds < 1:
        raise ConfigError("seeds", n_seeds, "a value >= 1")
    if seed is not None and "seed" in sets:
        raise UserError("seed is not allowed in both --seed and --set: give it once")
    user_axes = gridmod.parse_grid_args(grids, study.config, max_values=max_points)
    if seed is not None and "seed" in user_axes:
        raise UserError("seed is not allowed in both --seed and --grid: give the seeds with --grid, or the base "
                        "seed with --seed")
    both = sorted(set(user_axes) & set(sets))
    if both:
        raise UserError(f"{both[0]} is not allowed in both --set and --grid: give it one value with "
                        "--set, or sweep it with --grid")
    union = gridmod.merge(pre.grid, user_axes, fixed=set(sets))
    counts = [n_seeds if n_seeds is not None else int(g.pop(SEEDS_KEY, [pre.n_seeds])[0]) for g in union]
    for g in union:
        g.pop(SEEDS_KEY, None)
    if "seed" not in user_axes and "seed" not in sets:
        union = [{**g, "seed": [base_seed + i for i in range(k)]} for g, k in zip(union, counts)]
    # what was asked, as given: recorded in the manifest (`robustlab rerun` re-executes from
    # the resolved base config and grid below, which do not depend on today's presets)
    request = {"study": study.name, "preset": preset, "set": dict(sets), "grid": list(grids),
               "seed": seed, "seeds": n_seeds}
    return _resolved(study, preset, base, union, request, max_points)


def _resolved(study: Study, preset: str, base: Config, union: list[dict[str, list[Any]]],
              request: dict[str, Any], max_points: int | None = None) -> Plan:
    if max_points is not None:
        n = sum(math.prod(len(v) for v in g.values()) for g in union)
        if n > max_points:
            raise UserError(f"the grid is not allowed: it has {n} points, over the cap of {max_points}; "
                            "narrow it, or raise the cap with --max-points")
    points: list[Config] = []
    seen: set[str] = set()
    for overrides in gridmod.expand(union):
        cfg = base.replace(**overrides)
        key = cfg.key()
        if key not in seen:
            seen.add(key)
            points.append(cfg)
    if not points:
        raise UserError("grid is empty: no point to run")
    # a dataset whose files are missing fails every point: say so once, before anything runs
    from ..data import images as image_data  # (torch: imported only when a plan is made)

    for name, data_dir in sorted({(str(getattr(p, "dataset", "")), getattr(p, "data_dir", None) or "")
                                  for p in points}):
        if name in image_data.TORCHVISION:
            image_data.check_available(name, data_dir or None)
    return Plan(study, preset, base, [{k: list(v) for k, v in g.items()} for g in union],
                points, sorted({p.seed for p in points}), request)


def plan_from_manifest(study: Study, manifest: Mapping[str, Any]) -> Plan:
    """The plan a run directory was made from: its base config and grid, exactly.

    Raises :class:`UserError` when the study's config no longer gives the same points
    (a field was added, removed or re-validated since): the run cannot be re-executed exactly.
    """
    try:
        base = study.config.from_dict(manifest["base_config"])
        p = _resolved(study, manifest["preset"], base, [dict(g) for g in manifest["grid"]],
                      dict(manifest.get("request") or {"study": study.name, "preset": manifest["preset"]}))
    except ConfigError as exc:
        raise UserError(f"study={study.name!r} is not allowed: its config no longer accepts the "
                        f"recorded run ({exc})") from None
    if [c.key() for c in p.points] != list(manifest["point_keys"]):
        raise UserError(f"study={study.name!r} is not allowed: its config no longer gives the recorded "
                        "points (a field changed since the run); the run cannot be re-executed exactly")
    return p


# ----------------------------------------------------------------------------------------
# execution

def _holds_points(out: Path) -> bool:
    try:
        with Store(out / "store.sqlite", readonly=True) as store:
            return store.count() > 0
    except (UserError, OSError):
        return False


def check_run_dir(out: Path) -> None:
    """Before anything is written into ``out``: it can be written, none of robustlab's own files
    there is a symbolic link, and the records of a run already there are readable (a damaged
    manifest or store is a one-line error, and nothing is overwritten)."""
    out = Path(out)
    records.check_writable(out)
    integrity.check_own_files(out)
    if (out / "manifest.json").exists():
        records.read_manifest(out / "manifest.json")
    if (out / "store.sqlite").exists():
        with Store(out / "store.sqlite", readonly=True) as store:
            store.done(), store.failures()  # every record parses


def execute(plan_: Plan, out: Path, options: SweepOptions, *, progress_label: str | None = None,
            record: Mapping[str, Any] | None = None, started: Callable[[], None] | None = None,
            finalize_later: bool = False, reuse: Sequence[str | Path] = (),
            allow_mixed_code: bool = False) -> dict:
    """Run a planned study into ``out`` (created only now), then finalize. Returns summary.

    ``reuse``: run directories of the same study (and thread count) whose finished points
    this run takes instead of computing them, where a point's config is exactly one of this
    plan's (its hash): a grid extended, or a preset assembled from its slices, runs only what
    is new. The manifest's ``reused`` lists each source with its device, code and host.

    ``allow_mixed_code``: resume a run whose points were computed by other code (another
    commit, other local changes, another version of the study file); refused otherwise. The
    manifest's ``sittings`` records it, and the report says which points came from which code.

    ``started`` is called once the run is checked and its manifest written, before any point
    runs (the CLI says there how many workers it uses: an input error stays one line).

    ``finalize_later``: return ``{"out": out, "finalize": fn}`` once the points have run,
    without finalizing; ``fn()`` takes the directory's writer lock again and returns what
    this function would have (``reproduce`` draws one study's figures while the next
    study's points run)."""
    out = Path(out)
    fresh = not out.exists()
    prov = records.provenance(plan_.study.origin)  # the run's code identity, once: every check sees it
    _check_out(plan_, out, options, allow_mixed_code, prov)  # before anything is written
    sources = check_reuse(plan_, out, options, reuse)
    sweep_backends.prepare(options)  # e.g. an unreachable Ray address fails here, nothing written
    out.mkdir(parents=True, exist_ok=True)
    try:
        # one writer per run directory: a second one stops here, having written nothing
        with runlock.writer(out):
            _check_out(plan_, out, options, allow_mixed_code, prov)  # again, now that nobody else writes it
            _execute_locked(plan_, out, options, fresh, progress_label, record, started, prov, sources,
                            allow_mixed_code)
            if not finalize_later:
                return finalize(out, plan_.study)
    except runlock.LockedError:
        raise
    except BaseException:
        if fresh and not (out / "manifest.json").exists():
            shutil.rmtree(out, ignore_errors=True)
        raise

    def finalize_now() -> dict:
        with runlock.writer(out):
            return finalize(out, plan_.study)

    return {"out": str(out), "finalize": finalize_now}


def _check_out(plan_: Plan, out: Path, options: SweepOptions, allow_mixed_code: bool = True,
               prov: records.Provenance | None = None) -> None:
    """``out`` is new, empty, or holds this very run (resumed, by the same code — ``prov``, the
    run's provenance, computed here when not given — unless ``allow_mixed_code``); else a UserError."""
    manifest_path = out / "manifest.json"
    integrity.check_no_links(out)
    if manifest_path.exists():
        old = records.read_manifest(manifest_path)
        if old.get("study") != plan_.study.name or old.get("point_keys") != [
            p.key() for p in plan_.points
        ]:
            raise UserError(f"--out {str(out)!r} holds a different run (study "
                            f"{old.get('study')!r} or another grid): choose a new --out")
        if old.get("threads", 1) != options.threads:
            # float bits depend on the thread count: a run keeps the one it started with
            raise UserError(f"threads={options.threads} is not allowed: the run in --out {str(out)!r} "
                            f"started with threads={old.get('threads', 1)}; resume with that")
        if (out / "store.sqlite").exists():
            prov = prov or records.provenance(plan_.study.origin)
            with Store(out / "store.sqlite", readonly=True) as store:
                integrity.check_identity(out, old, store)
                integrity.check_code(out, old, store, prov.code_id, prov.ident, allow_mixed_code)
    elif out.exists() and any(p.name != runlock.LOCK_NAME for p in out.iterdir()):
        raise UserError(f"--out {str(out)!r} exists and is not a robustlab run directory: choose a new --out")
    check_run_dir(out)


def check_reuse(plan_: Plan, out: Path, options: SweepOptions,
                 reuse: Sequence[str | Path]) -> list[tuple[Path, dict, list[dict]]]:
    """Each ``reuse`` directory holds a readable run of this study at this thread count (and is
    not ``out``): ``[(dir, its manifest, its finished points)]``, read once and only read (a
    source may sit on a read-only disk); else a UserError, before anything is written."""
    sources = []
    for d in reuse:
        d = Path(d)
        if not (d / "manifest.json").is_file() or not (d / "store.sqlite").is_file():
            raise UserError(f"--reuse {str(d)!r} is not allowed: not a robustlab run directory "
                            "(no manifest.json and store.sqlite)")
        if d.resolve() == out.resolve():
            raise UserError(f"--reuse {str(d)!r} is not allowed: it is --out itself (re-running into "
                            "--out resumes it already)")
        m = records.read_manifest(d / "manifest.json")
        if m.get("study") != plan_.study.name:
            raise UserError(f"--reuse {str(d)!r} is not allowed: it holds a run of study "
                            f"{m.get('study')!r}, not {plan_.study.name!r}")
        if m.get("threads", 1) != options.threads:
            raise UserError(f"--reuse {str(d)!r} is not allowed: its points ran with threads="
                            f"{m.get('threads', 1)} and this run uses threads={options.threads} "
                            "(float bits depend on it); run with that")
        with Store(d / "store.sqlite", readonly=True) as src:
            integrity.check_identity(d, m, src)  # a source whose store is not its manifest's
            done = src.done()  # every finished record parses, or a one-line StoreError
        legacy = records.legacy_code_id(m)
        for e in done:
            e["code"] = e.get("code") or legacy  # a point keeps the code that computed it
        sources.append((d, m, done))
    return sources


def _take_reused(store: Store, keys: Sequence[str], sources: list[tuple[Path, dict, list[dict]]]) -> list[dict]:
    """Copy into ``store`` the finished points of ``sources`` that this plan holds and the store
    has not finished (a failed one is replaced): one entry per source that gave any."""
    wanted, have, taken = set(keys), store.keys("done"), []
    for d, m, done in sources:
        entries = [{**e, "status": "done"} for e in done if e["key"] in wanted and e["key"] not in have]
        if entries:
            store.record(entries, replace_failed=True)
            have |= {e["key"] for e in entries}
            known = {s["code_id"]: s.get("code") for s in m.get("sittings") or () if "code_id" in s}
            taken.append({"from": str(d.resolve()), "points": len(entries), "device": m.get("device"),
                          "code": m.get("code"), "host": m.get("host"), "at": records.now_iso(),
                          "code_ids": {c: known.get(c) for c in sorted({e["code"] for e in entries})}})
    return taken


def _sittings(old: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The sittings a manifest records; a manifest from before sittings gives its first one."""
    if not old:
        return []
    if old.get("sittings"):
        return list(old["sittings"])
    return [{"started": old.get("started"), "finished": old.get("finished"),
             "code_id": records.legacy_code_id(dict(old)), "code": None, "legacy_code": old.get("code"),
             "versions": old.get("versions"), "host": old.get("host")}]


def _execute_locked(plan_: Plan, out: Path, options: SweepOptions, fresh: bool,
                    progress_label: str | None, record: Mapping[str, Any] | None,
                    started: Callable[[], None] | None, prov: records.Provenance,
                    sources: Sequence[tuple[Path, dict, list[dict]]] = (), allow_mixed_code: bool = False) -> None:
    study = plan_.study
    manifest_path = out / "manifest.json"
    code = prov.code_id
    try:
        now = integrity.sitting(options, prov, allow_mixed_code)
        manifest = {
            "study": study.name,
            "title": study.title,
            "source": study.source,
            "preset": plan_.preset,
            "study_origin": dict(study.origin or {"kind": "built-in"}),
            "request": plan_.request,
            "base_config": plan_.base.to_dict(),
            "grid": plan_.grid,
            "seeds": plan_.seeds,
            "n_points": len(plan_.points),
            "point_keys": [p.key() for p in plan_.points],
            "device": options.device,
            "backend": options.backend,
            "workers": options.workers,
            "threads": options.threads,
            "versions": now["versions"],
            "code": prov.git,
            "code_id": code,
            "host": now["host"],
            "started": records.now_iso(),
            "finished": None,
            **dict(record or {}),
        }
        old = records.read_manifest(manifest_path) if manifest_path.exists() else None
        if old is not None:
            # the first sitting's record is never overwritten: each sitting is added to `sittings`
            for k in ("started", "versions", "code", "code_id", "host", "reused"):
                if k in old:
                    manifest[k] = old[k]
                elif k == "code_id":
                    manifest[k] = records.legacy_code_id(old)
            manifest["resumed"] = old.get("resumed", 0) + 1
        manifest["sittings"] = _sittings(old) + [now]
        if allow_mixed_code:
            manifest["allow_mixed_code"] = True
        records.write_json(manifest_path, manifest)
    except BaseException:
        if fresh:
            shutil.rmtree(out, ignore_errors=True)
        raise
    if started is not None:
        started()
    try:
        with Store(out / "store.sqlite", code=code) as store:
            if store.identity() is None:
                store.set_identity(integrity.identity(manifest))
            taken = _take_reused(store, manifest["point_keys"], list(sources))
            if taken:
                manifest["reused"] = manifest.get("reused", []) + taken
                records.write_json(manifest_path, manifest)
            stats = run_sweep(plan_.points, study.run_points, store, options, execute=sweep_backends.execute,
                              ensemble=study.ensemble, max_group=study.max_ensemble,
                              label=progress_label or study.name, weight=study.weight or study.cost)
    except (UserError, OSError):
        # e.g. the disk filled up: a fresh directory that holds no finished point is removed
        # (no half-written run); otherwise the store keeps every finished point for a resume
        if fresh and not _holds_points(out):
            shutil.rmtree(out, ignore_errors=True)
        raise
    manifest["sittings"][-1]["finished"] = records.now_iso()
    if old is not None and old.get("sweep") and not stats.get("ran") and not taken:
        # a resume that found nothing to run: the sweep that did the work keeps its record
        # (what it ran, its wall time, when the run finished); this sitting is in `sittings`
        manifest["sweep"], manifest["finished"] = old["sweep"], old.get("finished")
    else:
        manifest["finished"] = manifest["sittings"][-1]["finished"]
        manifest["sweep"] = stats
    records.write_json(manifest_path, manifest)


def finished_keys(plan_: Plan, out: Path, options: SweepOptions,
                  sources: Sequence[tuple[Path, dict, list[dict]]] = ()) -> set[str]:
    """Keys of this plan's points that a run into ``out`` would not compute: those ``out``
    holds already (a resumed run; failed ones too unless ``retry_failed``) and those the
    ``--reuse`` ``sources`` (:func:`check_reuse`) hold finished. Reads only."""
    keys = {p.key() for p in plan_.points}
    have: set[str] = set()
    if (out / "manifest.json").is_file() and (out / "store.sqlite").is_file():
        _check_out(plan_, out, options, True)  # another run there is the run's own error
        with Store(out / "store.sqlite", readonly=True) as store:
            have = store.keys("done") if options.retry_failed else store.keys()
    for _, _, done in sources:
        have |= {e["key"] for e in done}
    return keys & have


class PartialRunWarning(UserWarning):
    """:func:`load` read a run that holds fewer finished points than it planned."""


def load(out: str | Path) -> pd.DataFrame:
    """The results of a run directory as one DataFrame (one row per result row), in the
    plan's point order (as results.jsonl).

    ``df.attrs["completeness"]`` holds the run's points planned, done, failed and missing
    (``df.attrs["complete"]``: whether every planned point is done); a partial run (killed,
    with failed points, or an emptied store) also warns (:class:`PartialRunWarning`). A store
    that is not its manifest's, or whose values were edited since they were written, is a
    :class:`UserError`, as is a directory that is no run."""
    import warnings

    if not isinstance(out, str | os.PathLike):
        raise UserError(f"out={out!r} is not allowed: the path of a run directory")
    out = Path(out)
    if not out.is_dir():
        raise UserError(f"out={str(out)!r} is not allowed: no such directory")
    if not os.path.lexists(out / "store.sqlite"):
        raise UserError(f"out={str(out)!r} is not allowed: not a robustlab run directory (no store.sqlite)")
    manifest = records.read_manifest(out / "manifest.json") if os.path.lexists(out / "manifest.json") else None
    keys = manifest["point_keys"] if manifest else []
    with Store(out / "store.sqlite", readonly=True) as store:
        if manifest is not None:
            integrity.check_identity(out, manifest, store)
        done = _in_plan_order(store.done(), keys)
        integrity.check_values(out, store, done)
        failed = store.keys("failed")
    flat = _flat(done)
    held = integrity.result_rows(out / "results.jsonl")
    if held > len(flat):  # an emptied or truncated store: not an empty (or smaller) result
        raise UserError(f"{out / 'store.sqlite'} is not allowed: it holds {len(flat)} result rows and results.jsonl "
                        f"{held} (emptied, damaged or replaced): restore it, or recompute it with `robustlab rerun {out}`")
    df = pd.DataFrame(flat)
    comp = integrity.completeness(manifest, {d["key"] for d in done}, failed) if manifest else None
    df.attrs["completeness"] = comp
    df.attrs["complete"] = None if comp is None else comp["complete"]
    if comp is not None and not comp["complete"]:
        warnings.warn(f"{out} is a partial run ({integrity.completeness_text(comp)}): its results are "
                      "incomplete (df.attrs['completeness'] holds the counts)", PartialRunWarning, stacklevel=2)
    return df


def _in_plan_order(done: list[dict[str, Any]], point_keys: list[str]) -> list[dict[str, Any]]:
    """Stored points in the plan's order, not the order they finished in (which depends on
    the workers): claims are sums over rows, and a sum's last bits depend on its order."""
    order = {k: i for i, k in enumerate(point_keys)}
    return sorted(done, key=lambda r: (order.get(r["key"], len(order)), r["key"]))


def _flat(done: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**rec["params"], **r, "point": rec["key"]} for rec in done for r in rec["rows"]]


def finalize(out: Path, study: Study, *, force: bool = False) -> dict:
    """Rebuild results.jsonl, claims.json, figures and report.html from the store.

    Refused (one line, nothing rewritten) when the store is not the manifest's (another run's
    copied in, an edited manifest), when it holds fewer rows than the results.jsonl it would
    replace (emptied or truncated; ``force`` rewrites anyway), or when figures/ cannot be
    written (the report would lose its figures). The files are written only once the claims
    and figures are made, each through a temporary file and a rename."""
    out = Path(out)
    manifest = records.read_manifest(out / "manifest.json")
    integrity.check_no_links(out)
    with Store(out / "store.sqlite", readonly=True) as store:
        integrity.check_identity(out, manifest, store, study.config)
        done = _in_plan_order(store.done(), manifest["point_keys"])
        if not force:  # a value edited in the store is not republished
            integrity.check_values(out, store, done)
        failures = store.failures()
        code_rows = integrity.code_summary(store.codes(), manifest)
        n_stored = store.count()
    comp = integrity.completeness(manifest, {d["key"] for d in done}, {f["key"] for f in failures})
    flat = _flat(done)
    integrity.guard_rewrite(out, len(flat), n_stored, force=force)
    df = pd.DataFrame(flat)  # the claims see the rows in this order whatever order they finished in
    figdir = _writable_figdir(out)
    ctx = Context(out=out, figdir=figdir, manifest=manifest, failures=failures)
    claims: list[Claim] = []
    figures: list[Figure] = []
    problems: list[str] = []
    if not comp["complete"]:
        problems.append(f"{integrity.completeness_text(comp)}: the claims are computed on an incomplete grid "
                        "(each is marked so in claims.json, and --strict fails)")
    if len(code_rows) > 1:
        problems.append(f"points from {len(code_rows)} versions of the code (resumed with --allow-mixed-code or "
                        "taken with --reuse): " + "; ".join(f"{r['points']} by {r['code']}" for r in code_rows))
    if len(df):
        claims, figures = _claims_and_figures(study, df, ctx, problems)
    else:
        claims = [Claim("no-results", "the study produced results",
                        Verdict(stats.INCONCLUSIVE, reason="no point produced results"),
                        {"failed_points": len(failures)}, study.source)]
    preset = manifest.get("preset")
    claim_dicts = integrity.mark_incomplete([_capped(study, preset, _declared(study, c)).to_dict() for c in claims],
                                            comp)
    records.write_jsonl(out / "results.jsonl", flat)
    records.write_json(out / "claims.json", claim_dicts)
    shown = {**manifest, "completeness": comp, "code_versions": code_rows}
    section = report_html.StudySection(
        name=study.name, title=study.title, source=study.source, summary=study.summary,
        manifest=shown, claims=claim_dicts, figures=[dataclasses.asdict(f) for f in figures],
        failures=failures, problems=problems, n_rows=len(df), warnings=_warnings(done + failures),
    )
    report_html.write_report(out / "report.html", [section], root=out,
                             title=f"robustlab — {study.title}")
    return {"out": str(out), "claims": claim_dicts, "failures": failures, "problems": problems,
            "section": section, "points": comp, "code_versions": code_rows}


def _writable_figdir(out: Path) -> Path:
    """``out/figures``, made and checked writable (by trying: root ignores permission bits)
    before anything is rewritten."""
    figdir = out / "figures"
    try:
        figdir.mkdir(exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".robustlab-probe.", dir=figdir)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UserError(f"{figdir} cannot be written ({exc.strerror or type(exc).__name__}): report.html, "
                        f"claims.json and results.jsonl were left as they are; make it writable and run "
                        f"`robustlab report {out}`") from None
    return figdir


def _claims_and_figures(study: Study, df: pd.DataFrame, ctx: Context,
                        problems: list[str]) -> tuple[list[Claim], list[Figure]]:
    """The study's claims and figures; a claim check that crashes or returns something other
    than a list of Claim is reported as such (a claims-error claim), never hidden. A figure that
    cannot be written for lack of room or permission is an error: the report is not replaced by
    one without it."""
    sigint = Sigint()
    try:
        with study_code() as sigint:
            claims = study.claims(df, ctx)
        if not isinstance(claims, list) or not all(isinstance(c, Claim) for c in claims):
            bad = claims if not isinstance(claims, list) else next(c for c in claims if not isinstance(c, Claim))
            raise TypeError(f"study {study.name!r}: claims() must return a list of Claim, got "
                            f"{'a list holding ' if isinstance(claims, list) else ''}{type(bad).__name__}")
        for c in claims:  # evidence JSON cannot hold (a set, 10**5000, nesting too deep) is the study's error
            _json_problem(c)
    except (Exception, SystemExit, KeyboardInterrupt) as exc:  # reported, not hidden (sys.exit too)
        if isinstance(exc, KeyboardInterrupt) and sigint.seen:
            raise
        problems.append(f"{CLAIMS_FAILED}: {exc!r}")
        claims = [Claim(CLAIMS_ERROR, "the claim checks ran",
                        Verdict(stats.INCONCLUSIVE, reason="the claim checks crashed"),
                        {"error": _short(repr(exc)), "traceback": traceback.format_exc()}, study.source)]
    figures: list[Figure] = []
    try:
        from ..report.plots import style

        # the house style for this step only (the caller's rcParams come back after), and the
        # study's own code guarded as claims() is
        with style(), study_code() as sigint:
            figures = study.figures(df, ctx)
        if not isinstance(figures, list) or not all(isinstance(f, Figure) for f in figures):
            raise TypeError(f"study {study.name!r}: figures() must return a list of Figure, got "
                            f"{type(figures).__name__}")
    except OSError as exc:
        raise UserError(f"{ctx.figdir} cannot be written ({exc.strerror or exc}); report.html, claims.json "
                        "and results.jsonl were left as they are: fix it and run `robustlab report "
                        f"{ctx.out}`") from None
    except (Exception, SystemExit, KeyboardInterrupt) as exc:
        if isinstance(exc, KeyboardInterrupt) and sigint.seen:
            raise
        figures = []
        problems.append(f"{FIGURES_FAILED}: {exc!r}\n{traceback.format_exc()}")
    return claims, figures


CLAIMS_ERROR = "claims-error"  # the claim that stands for a claims() that failed
CLAIMS_FAILED = "claims could not be computed"  # the problem line it leaves (failure_line reads it)
FIGURES_FAILED = "figures could not be drawn"


def _short(text: str, n: int = 500) -> str:
    return text if len(text) <= n else text[:n] + "…"


def _json_problem(claim: Claim) -> None:
    """A TypeError naming the claim when claims.json cannot hold it (its evidence holds a set,
    an object, an integer too large to write, or nests too deep)."""
    from ..reader import depth_problem

    try:
        records.dumps(claim.to_dict())
        deep = depth_problem([claim.to_dict()])  # as claims.json nests it: what the reader would refuse
    except (TypeError, ValueError, RecursionError) as exc:
        raise TypeError(f"claim {claim.id!r}: its evidence cannot be written as JSON "
                        f"({type(exc).__name__}: {_short(str(exc), 120)})") from None
    if deep:
        raise TypeError(f"claim {claim.id!r}: its evidence cannot be read back from claims.json ({deep})")


def _declared(study: Study, claim: Claim) -> Claim:
    """A claim with the kind its study declared for it (the declaration wins: a study cannot
    count a self-check among the paper's claims by forgetting to say so)."""
    spec = study.spec(claim.id)
    if spec is None or spec.kind == claim.kind:
        return claim
    return dataclasses.replace(claim, kind=spec.kind, verdict=claim.raw_verdict)


def _capped(study: Study, preset: Any, claim: Claim) -> Claim:
    """At a preset that declares the claim undecided (:attr:`Preset.undecided`), a reproduced or
    contradicted verdict reads inconclusive, saying why; the verdict before the cap is kept in
    the evidence (``uncapped``)."""
    pre = study.presets.get(preset) if isinstance(preset, str) else None
    why = (getattr(pre, "undecided", None) or {}).get(claim.id)
    v = claim.decision
    if not why or v.verdict not in (stats.REPRODUCED, stats.CONTRADICTED):
        return claim
    capped = dataclasses.replace(v, verdict=stats.INCONCLUSIVE, seeds_needed=None,
                                 reason=f"not decided at preset {preset!r} (its verdict changes with the base seed "
                                        f"there): {why}; it read {v.verdict} here" + (f"; {v.reason}" if v.reason else ""))
    evidence = {**claim.evidence, "uncapped": {"verdict": v.verdict, "effect": v.effect,
                                               "interval": None if v.interval is None else list(v.interval)}}
    return dataclasses.replace(claim, verdict=capped, evidence=evidence)


def _warnings(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each distinct warning the points issued, with the points (params) it concerns."""
    found: dict[str, list[dict[str, Any]]] = {}
    for e in entries:
        for text in e.get("warnings") or ():
            found.setdefault(text, []).append(e["params"])
    return [{"message": m, "points": pts} for m, pts in found.items()]


def product_grid(**axes: Sequence[Any]) -> list[dict[str, Any]]:
    """All combinations of the given axes (a helper for studies)."""
    keys = list(axes)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(axes[k] for k in keys))]


def json_safe(obj: Any) -> Any:
    return json.loads(records.dumps(obj))
