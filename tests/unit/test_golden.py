"""Golden outputs: what the commands print, byte for byte, at a fixed width with no colour.

Each case is one file under ``tests/golden/``: ``rc=N``, stdout, ``--stderr--``, stderr (as
``tools/capture_outputs.py`` writes them, so the two can be diffed), or the XML/JSON a renderer returns.
The CLI runs in this process (``nccl_doctor.cli.main(argv)``) with a fixed environment: ``COLUMNS=160``,
``NO_COLOR=1``, ``HOME=/root``, no NCCL_/GLOO_/SLURM_ variable but the case's own. Temporary paths are
masked (``<FX>`` the fixtures, ``<TREES>`` the sysfs_builder trees, ``<OUT>`` an output directory).
Hosts come from the trees' /etc/hostname and from the hand-built reports, never from this machine.

A change that shows here is a change users see. When it is meant, regenerate and review the diff:

    python tests/unit/test_golden.py --regen         # rewrite every golden file from this checkout
    python tests/unit/test_golden.py --regen parse-  # only the cases whose name starts with parse-
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if __name__ == "__main__":  # run as a script: this checkout's tests.helpers and package
    sys.path.insert(0, str(ROOT))

import pytest  # noqa: E402 (after the path, when run as a script)

from tests.helpers import sysfs_builder  # noqa: E402
from tests.helpers.golden_cases import BAD_INPUTS, PROBE_ENVS, SPECS  # noqa: E402

GOLDEN = ROOT / "tests" / "golden"
FIXTURES = ROOT / "fixtures"
WIDTH = "160"
BASE_ENV = {"COLUMNS": WIDTH, "NO_COLOR": "1", "HOME": "/root", "LANG": "C.UTF-8"}

PLANS = {
    "plan-70b-16x8": ["plan", "--params", "70B", "--nodes", "16", "--gpus-per-node", "8",
                      "--intra-gbps", "360", "--inter-gbps", "45"],
    "plan-8b-2x8-slow-inter": ["plan", "--params", "8B", "--nodes", "2", "--gpus-per-node", "8",
                               "--intra-gbps", "150", "--inter-gbps", "3", "--gpu-mem-gb", "80"],
    "plan-405b-4x8-no-fit": ["plan", "--params", "405B", "--nodes", "4", "--gpus-per-node", "8",
                             "--intra-gbps", "360", "--inter-gbps", "45", "--gpu-mem-gb", "40"],
}


@dataclass
class Paths:
    """Where a run's inputs lie, and the tags they are masked with."""

    trees: Path
    out: Path
    masks: list[tuple[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.masks = [(str(FIXTURES), "<FX>"), (str(self.trees), "<TREES>"), (str(self.out), "<OUT>")]

    def mask(self, text: str) -> str:
        for path, tag in self.masks:
            text = text.replace(path, tag)
        return text

    def tree(self, spec: str) -> Path:
        root = self.trees / spec
        if not root.exists():
            sysfs_builder.build(getattr(sysfs_builder, spec)(), root)
        return root


@contextlib.contextmanager
def _environ(extra: dict[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update({"PATH": saved.get("PATH", "/usr/bin:/bin"), **BASE_ENV, **extra})
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def run_cli(argv: list[str], env: dict[str, str] | None = None) -> str:
    """``nccl-doctor ARGV`` in this process: ``rc=N``, stdout, ``--stderr--``, stderr."""
    from nccl_doctor.cli import main

    out, err = io.StringIO(), io.StringIO()
    with _environ(env or {}), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:  # --help and argparse's usage errors
            rc = exc.code if isinstance(exc.code, int) else 2
    return f"rc={rc}\n{out.getvalue()}\n--stderr--\n{err.getvalue()}"


# ---- the cases: name -> a function of the paths, returning the text to compare -------------------------

Case = Callable[[Paths], str]


def _logs() -> list[Path]:
    return sorted(FIXTURES.rglob("*.log"))


def _cli(argv: Callable[[Paths], list[str]], env: dict[str, str] | None = None) -> Case:
    return lambda paths: paths.mask(run_cli(argv(paths), env))


def _junit(spec: str) -> Case:
    def case(paths: Paths) -> str:
        target = paths.out / f"probe-{spec}.junit.xml"
        text = run_cli(["probe", "--root", str(paths.tree(spec)), "--format", "json", "--junit-out", str(target)])
        return paths.mask(f"{text}\n--junit--\n{target.read_text()}")
    return case


def cases() -> dict[str, Case]:
    found: dict[str, Case] = {}
    for log in _logs():
        rel = str(log.relative_to(FIXTURES)).replace("/", "_")
        found[f"parse-{rel}-json"] = _cli(lambda _, log=log: ["parse", str(log), "--format", "json"])
        found[f"parse-{rel}-text"] = _cli(lambda _, log=log: ["parse", str(log)])
    for folder in sorted(p for p in (FIXTURES / "logs").iterdir() if p.is_dir()):
        found[f"parse-dir-{folder.name}"] = _cli(lambda _, f=folder: ["parse", str(f), "--format", "json"])
    found["parse-all-json"] = _cli(lambda _: ["parse", *map(str, _logs()), "--format", "json"])
    found["parse-all-text-strict"] = _cli(lambda _: ["parse", str(FIXTURES / "logs"), "--strict"])
    for spec in SPECS:
        for env_name, env in PROBE_ENVS.items():
            found[f"probe-{spec}-{env_name}-json"] = _cli(
                lambda p, s=spec: ["probe", "--root", str(p.tree(s)), "--format", "json"], env)
            found[f"probe-{spec}-{env_name}-text"] = _cli(lambda p, s=spec: ["probe", "--root", str(p.tree(s))], env)
        found[f"probe-{spec}-junit"] = _junit(spec)
    for name, argv in PLANS.items():
        found[f"{name}-text"] = _cli(lambda _, a=argv: a)
        found[f"{name}-json"] = _cli(lambda _, a=argv: [*a, "--format", "json"])
    for command in ("probe", "parse", "bench", "preflight", "plan", "explain"):
        found[f"help-{command}"] = _cli(lambda _, c=command: [c, "--help"])
    found["help"] = _cli(lambda _: ["--help"])
    found["explain-ND202"] = _cli(lambda _: ["explain", "ND202"])
    found["explain-all"] = _cli(lambda _: ["explain"])
    for name, argv in BAD_INPUTS.items():
        found[name] = _cli(lambda _, a=argv: a)
    from tests.helpers import golden_reports

    for name, build in golden_reports.REPORTS.items():
        for fmt, render in golden_reports.FORMATS.items():
            found[f"render-{name}-{fmt}"] = lambda _, b=build, r=render: r(b())
    return found


CASES = cases()


@pytest.fixture(scope="module")
def paths(tmp_path_factory) -> Paths:
    return Paths(trees=tmp_path_factory.mktemp("trees"), out=tmp_path_factory.mktemp("out"))


@pytest.mark.parametrize("name", sorted(CASES))
def test_output_is_the_golden_one(name: str, paths: Paths):
    golden = GOLDEN / f"{name}.out"
    assert golden.exists(), f"{golden.relative_to(ROOT)} is missing: python tests/unit/test_golden.py --regen {name}"
    assert CASES[name](paths) == golden.read_text(), (
        f"{name} differs from {golden.relative_to(ROOT)}; if meant: python tests/unit/test_golden.py --regen {name}")


def test_every_golden_file_is_a_case():
    """A golden file whose case is gone would never be compared again."""
    assert sorted(p.stem for p in GOLDEN.glob("*.out")) == sorted(CASES)


def regen(prefixes: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        paths = Paths(trees=Path(tmp) / "trees", out=Path(tmp) / "out")
        paths.out.mkdir(parents=True)
        GOLDEN.mkdir(parents=True, exist_ok=True)
        if not prefixes:
            shutil.rmtree(GOLDEN)
            GOLDEN.mkdir()
        for name, case in sorted(CASES.items()):
            if not prefixes or name.startswith(tuple(prefixes)):
                (GOLDEN / f"{name}.out").write_text(case(paths))
                print(f"wrote {GOLDEN.relative_to(ROOT)}/{name}.out")


if __name__ == "__main__":
    if sys.argv[1:2] != ["--regen"]:
        sys.exit(f"usage: python {Path(__file__).relative_to(ROOT)} --regen [NAME_PREFIX...]")
    regen(sys.argv[2:])
