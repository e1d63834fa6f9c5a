"""The launcher examples: ``examples/kubernetes/pytorchjob-preflight.yaml`` is a PyTorchJob whose every pod runs
preflight before training (read with PyYAML when installed, else with the subset reader), and
``examples/mpirun.sh`` runs one preflight per node with node 0's address passed on. Each preflight line parses
with preflight's own parser."""

from __future__ import annotations

import importlib.util
import shlex
from pathlib import Path
from typing import Any

import pytest

from nccl_doctor.cli import build_parser
from tests.helpers import yaml_subset

ROOT = Path(__file__).resolve().parents[2]
PYTORCHJOB = ROOT / "examples" / "kubernetes" / "pytorchjob-preflight.yaml"
MPIRUN = ROOT / "examples" / "mpirun.sh"
HAVE_PYYAML = importlib.util.find_spec("yaml") is not None


def _load(text: str) -> Any:
    """PyYAML when installed; else the subset reader (which refuses what it does not know, never misreads)."""
    if HAVE_PYYAML:
        import yaml  # an optional test dependency

        return yaml.safe_load(text)
    return yaml_subset.load(text)


def _preflight_argv(script: str) -> list[str]:
    """The ``nccl-doctor preflight ...`` of a shell script (continuation lines joined), as argv."""
    joined = script.replace("\\\n", " ")
    [line] = [x for x in joined.splitlines() if "nccl-doctor preflight" in x and not x.lstrip().startswith("#")]
    words = shlex.split(line)
    argv = words[words.index("nccl-doctor") + 1:]
    return [w for w in argv if w != "$@"]


def _parses(argv: list[str]) -> None:
    try:
        build_parser(argv).parse_args(argv)
    except SystemExit:
        pytest.fail(f"does not parse: {argv}")


def test_the_pytorchjob_runs_preflight_on_every_pod_before_training():
    job = _load(PYTORCHJOB.read_text())
    assert (job["apiVersion"], job["kind"]) == ("kubeflow.org/v1", "PyTorchJob")
    specs = job["spec"]["pytorchReplicaSpecs"]
    assert set(specs) == {"Master", "Worker"} and specs["Master"]["replicas"] == 1
    port = specs["Master"]["template"]["spec"]["containers"][0]["ports"][0]
    assert port == {"name": "pytorchjob-port", "containerPort": 23456}  # the operator's MASTER_PORT
    for role, spec in specs.items():
        [container] = spec["template"]["spec"]["containers"]
        assert container["name"] == "pytorch", role  # the container the operator sets PET_*/MASTER_* in
        shell, flag, script = container["command"]
        assert (shell, flag) == ("/bin/bash", "-c")
        assert script.startswith("set -euo pipefail\n"), role  # a failing preflight ends the pod
        assert script.index("nccl-doctor preflight") < script.index("torchrun"), role
        argv = _preflight_argv(script)
        assert argv[0] == "preflight" and not {"--nnodes", "--node-rank", "--master-addr"} & set(argv), role
        _parses(argv)
        [secret] = [e for e in container["env"] if e["name"] == "NCCL_DOCTOR_SECRET"]
        assert secret["valueFrom"]["secretKeyRef"] == {"name": "nccl-doctor", "key": "secret"}
    assert specs["Master"]["template"]["spec"]["containers"][0]["command"] == \
        specs["Worker"]["template"]["spec"]["containers"][0]["command"]


def test_the_mpirun_line_starts_one_preflight_per_node_with_node_0s_address():
    script = MPIRUN.read_text()
    joined = script.replace("\\\n", " ")
    [line] = [x for x in joined.splitlines() if x.lstrip().startswith("mpirun ")]
    words = shlex.split(line)
    assert words[words.index("-N") + 1] == "1"
    assert {"MASTER_ADDR", "MASTER_PORT", "NCCL_DOCTOR_SECRET"} <= {words[i + 1] for i, w in enumerate(words)
                                                                    if w == "-x"}
    _parses(_preflight_argv(script))


# --- the subset reader the YAML test falls back on -------------------------------------------------------------
def test_the_subset_reader_reads_what_pyyaml_would():
    text = """# a comment
a: 1
b: "two # not a comment"
c: 'it''s'
d:
  - x
  - name: y   # a comment
    value: true
  - |
    line 1
      line 2
e: null
f:
"""
    assert yaml_subset.load(text) == {"a": 1, "b": "two # not a comment", "c": "it's",
                                      "d": ["x", {"name": "y", "value": True}, "line 1\n  line 2\n"],
                                      "e": None, "f": None}


@pytest.mark.parametrize("text", ["a: [1, 2]\n", "a: {b: 1}\n", "a: &x 1\n", "a: 1\na: 2\n", "a: 1\n  b: 2\n",
                                  "a:\n\t- 1\n", "just text\n"])
def test_the_subset_reader_refuses_what_it_does_not_know(text):
    with pytest.raises(yaml_subset.SubsetError):
        yaml_subset.load(text)
