"""Capture what parse and probe print on the fixtures, to diff two checkouts (a refactor must change nothing).

    python tools/capture_outputs.py OUT [--fixtures DIR]      # with this checkout's interpreter
    diff -r OUT_BEFORE OUT_AFTER

Runs, in subprocesses of the current interpreter: ``parse`` (JSON and text) on every fixture log, on each
fixture directory and on all logs at once; ``probe`` (JSON, text, JUnit) on the sysfs_builder trees under a few
environments; every ``--help``; a few bad inputs. The fixtures are copied next to OUT first and their paths
masked in the outputs, so two checkouts (or an old copy of the fixtures, ``--fixtures``) compare byte for byte.

The suite makes the same comparison on every run, in-process, against ``tests/golden/``
(``tests/unit/test_golden.py``: the same names and format, plus plan, explain and the renderers).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # run as a script: tests.helpers from this checkout

from tests.helpers import sysfs_builder  # noqa: E402
from tests.helpers.golden_cases import BAD_INPUTS, SPECS  # noqa: E402
from tests.helpers.golden_cases import PROBE_ENVS as ENVS  # noqa: E402


class Capture:
    def __init__(self, out: Path, fixtures: Path):
        self.out = out
        self.fx = out.parent / f".{out.name}-fx"
        self.trees = out.parent / f".{out.name}-trees"
        for scratch in (self.fx, self.trees):
            shutil.rmtree(scratch, ignore_errors=True)
        shutil.copytree(fixtures, self.fx)
        out.mkdir(parents=True, exist_ok=True)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "GLOO_"))}
        self.env.update(COLUMNS="160", NO_COLOR="1")

    def run(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        proc = subprocess.run([sys.executable, "-m", "nccl_doctor", *argv], capture_output=True, text=True,
                              env={**self.env, **(env or {})}, cwd=self.out.parent, check=False)
        text = f"rc={proc.returncode}\n{proc.stdout}\n--stderr--\n{proc.stderr}"
        for prefix, tag in ((self.fx, "<FX>"), (self.trees, "<TREES>"), (self.out, "<OUT>")):
            text = text.replace(str(prefix), tag)
        (self.out / f"{name}.out").write_text(text)

    def parse(self) -> None:
        logs = sorted(self.fx.rglob("*.log"))
        for log in logs:
            rel = str(log.relative_to(self.fx)).replace("/", "_")
            self.run(f"parse-{rel}-json", ["parse", str(log), "--format", "json"])
            self.run(f"parse-{rel}-text", ["parse", str(log)])
        for folder in sorted(p for p in (self.fx / "logs").iterdir() if p.is_dir()):
            self.run(f"parse-dir-{folder.name}", ["parse", str(folder), "--format", "json"])
        self.run("parse-all-json", ["parse", *map(str, logs), "--format", "json"])

    def probe(self) -> None:
        for spec in SPECS:
            root = sysfs_builder.build(getattr(sysfs_builder, spec)(), self.trees / spec)
            for env_name, env in ENVS.items():
                self.run(f"probe-{spec}-{env_name}-json", ["probe", "--root", str(root), "--format", "json"], env)
                self.run(f"probe-{spec}-{env_name}-text", ["probe", "--root", str(root)], env)
            self.run(f"probe-{spec}-junit", ["probe", "--root", str(root), "--format", "json",
                                             "--junit-out", str(self.out / f"probe-{spec}.junit.xml")])

    def cli(self) -> None:
        for command in ("probe", "parse", "bench", "preflight"):
            self.run(f"help-{command}", [command, "--help"])
        self.run("help", ["--help"])
        for name, argv in BAD_INPUTS.items():
            self.run(name, argv)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="an empty or new directory for the outputs")
    ap.add_argument("--fixtures", type=Path, default=REPO / "fixtures", help="the fixtures to run on")
    args = ap.parse_args()
    capture = Capture(args.out.resolve(), args.fixtures.resolve())
    capture.parse()
    capture.probe()
    capture.cli()


if __name__ == "__main__":
    main()
