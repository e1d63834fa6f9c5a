"""Every command's options (issue 20): built from the real parser, checked as they are built, and given back
by ``argv()`` so that a launcher's ranks get every option it does not keep to itself.

The round trip covers every field of every options class: a field added without a value in ``NON_DEFAULT``
fails here, and so does one the launcher keeps (``LAUNCH_ONLY``) without saying so in ``LAUNCH_ONLY_PINNED``.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from nccl_doctor.bench.options import BenchOptions
from nccl_doctor.cli import DRAINABLE, parse_options
from nccl_doctor.errors import InputError
from nccl_doctor.explain import ExplainOptions
from nccl_doctor.logs.options import ParseOptions
from nccl_doctor.node.options import ProbeOptions
from nccl_doctor.node.snapenv import EnvSource
from nccl_doctor.outputs import OutputFormat, OutputOptions
from nccl_doctor.plan.options import PlanOptions
from nccl_doctor.preflight.options import PreflightOptions

COMMANDS: dict[str, type[Any]] = {"probe": ProbeOptions, "parse": ParseOptions, "bench": BenchOptions,
                                  "preflight": PreflightOptions, "plan": PlanOptions, "explain": ExplainOptions}
REQUIRED: dict[str, dict[str, Any]] = {"parse": {"paths": ("a.log",)}, "plan": {"params": "7B"}}
# fields a value needs beside it to be valid
NEEDS: dict[tuple[str, str], dict[str, Any]] = {("preflight", "fsdp_smoke_dir"): {"fsdp_smoke": True}}
# what argv() always sets, whatever the options said
SET_BY_ARGV: dict[str, dict[str, Any]] = {"preflight": {"worker": True}}
LAUNCH_ONLY_PINNED = {
    "probe": set(), "parse": set(), "plan": set(), "explain": set(),
    "bench": {"nproc_per_node", "nnodes", "rdzv_endpoint", "rdzv_id", "deadline"},
    "preflight": {"nproc_per_node", "plan_params", "rendezvous_timeout", "nnodes", "node_rank", "master_addr", "port",
                  "output"},
}


def non_default(command: str, tmp: Path) -> dict[str, Any]:
    """A value other than the default for every field but ``output`` (``output_non_default``)."""
    return {
        "probe": {"root": "/srv/snapshot", "snapshot": tmp / "snap.tar.gz", "env": EnvSource.LIVE},
        "parse": {"paths": ("a.log", "logs/", "-"), "explain_unknown": True, "jobs": 3},
        "bench": {"nproc_per_node": 4, "nnodes": 2, "rdzv_endpoint": "n1:29400", "rdzv_id": "job7", "timeout": 99.5,
                  "collective_timeout": 33.25, "deadline": 77.0, "ops": "ar,ag", "groups": "world,inter",
                  "sizes": "1M,4M", "iters": 7, "warmup": 0, "pair_size": "8M", "no_pairs": True, "cpu": True},
        "preflight": {"nproc_per_node": 4, "fsdp_smoke": True, "fsdp_smoke_dir": str(tmp), "cpu": True,
                      "plan_params": "70B", "timeout": 99.5, "collective_timeout": 33.25, "rendezvous_timeout": 44.0,
                      "nnodes": 3, "node_rank": 2, "master_addr": "10.0.0.1:29400", "port": 31000, "worker": True},
        "plan": {"params": "70B", "nodes": 4, "gpus_per_node": 8, "from_file": tmp / "bench.json", "intra_gbps": 300.5,
                 "inter_gbps": 40.25, "param_dtype": "fp16", "reduce_dtype": "bf16", "gpu_mem_gb": 141.0,
                 "headroom": 0.5, "step_compute_s": 1.5},
        "explain": {"code": "ND102"},
    }[command]


def output_non_default(tmp: Path) -> dict[str, Any]:
    return {"format": "json", "files": {kind: tmp / f"report.{kind}" for kind in OutputFormat}, "strict": True,
            "drain_on_fail": True}


def _without_launch_only(options: Any) -> Any:
    """``options`` as its ranks see it: the launch-only fields at their defaults."""
    defaults = type(options)(**REQUIRED.get(_command(options), {}))
    return dataclasses.replace(options, **{name: getattr(defaults, name) for name in type(options).LAUNCH_ONLY})


def _command(options: Any) -> str:
    return next(c for c, cls in COMMANDS.items() if isinstance(options, cls))


def _cases(tmp: Path) -> list[tuple[str, str, Any]]:
    """(command, field, options with that one field not at its default) for every field of every class."""
    cases = []
    for command, cls in COMMANDS.items():
        base = REQUIRED.get(command, {})
        for name, value in non_default(command, tmp).items():
            cases.append((command, name, cls(**{**base, **NEEDS.get((command, name), {}), name: value})))
        for name, value in output_non_default(tmp).items():
            if name == "drain_on_fail" and command not in DRAINABLE:
                continue  # not an option of this command: its parser has no --drain-on-fail
            cases.append((command, f"output.{name}", cls(**base, output=OutputOptions(**{name: value}))))
    return cases


@pytest.mark.parametrize("command", COMMANDS)
def test_every_field_has_a_non_default_value_here(command, tmp_path):
    """A new field fails this test until it is given a value (and so goes through the round trip)."""
    named = {f.name for f in dataclasses.fields(COMMANDS[command])}
    assert named == set(non_default(command, tmp_path)) | {"output"}
    assert {f.name for f in dataclasses.fields(OutputOptions)} == set(output_non_default(tmp_path))


@pytest.mark.parametrize("command", COMMANDS)
def test_launch_only_fields_are_pinned(command):
    """Keeping an option from the ranks is a decision: it is listed in the class and here."""
    assert set(COMMANDS[command].LAUNCH_ONLY) == LAUNCH_ONLY_PINNED[command]


def test_every_option_of_every_command_survives_argv_and_the_real_parser(tmp_path):
    tmp = tmp_path.resolve()
    (tmp / "bench.json").write_text("{}")
    checked = 0
    for command, name, options in _cases(tmp):
        parsed_command, parsed = parse_options(options.argv())
        expected = dataclasses.replace(_without_launch_only(options), **SET_BY_ARGV.get(command, {}))
        assert (parsed_command, parsed) == (command, expected), f"{command} {name}: {options.argv()}"
        top = name.split(".")[0]
        kept = top in options.LAUNCH_ONLY or name in options.LAUNCH_ONLY or name in SET_BY_ARGV.get(command, {})
        if not kept:  # really forwarded, not the default
            default = COMMANDS[command](**REQUIRED.get(command, {}), **SET_BY_ARGV.get(command, {}))
            assert parsed != default, f"{command} {name} was not forwarded: {options.argv()}"
        checked += 1
    assert checked == len(_cases(tmp)) >= 60


def test_a_ranks_argv_for_bench_and_preflight():
    bench = BenchOptions(ops="ag", cpu=True, nnodes=2, output=OutputOptions(format="json", strict=True))
    assert bench.argv() == ["bench", "--warmup", "1", "--timeout", "600.0", "--collective-timeout", "120.0", "--ops",
                            "ag", "--cpu", "--format", "json", "--strict"]
    preflight = PreflightOptions(cpu=True, timeout=30, port=31000, output=OutputOptions(format="json"))
    assert preflight.argv() == ["preflight", "--worker", "--timeout", "30", "--collective-timeout", "60.0", "--cpu"]


def test_the_report_files_reach_the_ranks_as_absolute_paths(tmp_path, monkeypatch):
    """A link at --prom-out is replaced where it is (its own name kept); the others are resolved."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "real").mkdir()
    (tmp_path / "here").symlink_to(tmp_path / "real")
    output = OutputOptions(files={OutputFormat.JSON: Path("here/r.json"), OutputFormat.PROM: Path("here/r.prom")})
    real = tmp_path.resolve() / "real"
    assert output.argv() == ["--format", "text", "--json-out", str(real / "r.json"),
                             "--prom-out", str(tmp_path.absolute() / "here" / "r.prom")]


def test_deadline_is_still_the_old_name_of_timeout():
    _, options = parse_options(["bench", "--deadline", "60"])
    assert (options.timeout, options.deadline) == (60.0, None)
    assert options.argv()[3:5] == ["--timeout", "60.0"]
    _, both = parse_options(["bench", "--timeout", "30", "--deadline", "45"])
    assert both.timeout == 45.0  # the old name wins: it is what the user typed
    with pytest.raises(InputError, match=r"^--deadline 3: the minimum is 10 seconds"):
        parse_options(["bench", "--deadline", "3"])


@pytest.mark.parametrize(("build", "message"), [
    (lambda: BenchOptions(ops=" "), "--ops: empty"),
    (lambda: BenchOptions(groups="world,both"), "--groups: unknown both; choose from world, intra, inter"),
    (lambda: BenchOptions(iters=0), "--iters must be >= 1, got 0"),
    (lambda: BenchOptions(warmup=-1), "--warmup must be >= 0, got -1"),
    (lambda: BenchOptions(rdzv_endpoint="n1"), "--rdzv-endpoint 'n1' is not HOST:PORT (e.g. n1:29500)"),
    (lambda: PreflightOptions(nproc_per_node=0), "--nproc-per-node must be >= 1 (got 0)"),
    (lambda: PreflightOptions(port=70000), "--port 70000 is not a TCP port (1-65535)"),
    (lambda: PreflightOptions(fsdp_smoke_dir="/"), "--fsdp-smoke-dir is only used by --fsdp-smoke: add --fsdp-smoke"),
    (lambda: PreflightOptions(fsdp_smoke=True, fsdp_smoke_dir="/nonexistent-dir"),
     "--fsdp-smoke-dir '/nonexistent-dir': no such directory"),
    (lambda: ProbeOptions(env="both"), "--env: expected one of snapshot, live, got 'both'"),
    (lambda: ParseOptions(paths=("a",), jobs=0), "--jobs: expected a number of processes >= 1, got 0"),
    (lambda: PlanOptions(params="7B", nodes=0), "--nodes: expected a number > 0, got 0"),
    (lambda: PlanOptions(params="7B", headroom=1.5), "--headroom: expected a fraction in (0, 1], got 1.5"),
    (lambda: OutputOptions(format="xml"), "--format: expected one of text, json, got 'xml'"),
])
def test_options_built_in_code_are_checked_like_the_command_line(build, message):
    with pytest.raises(InputError, match="^" + re.escape(message)):
        build()


def test_options_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        BenchOptions().timeout = 1  # type: ignore[misc]
