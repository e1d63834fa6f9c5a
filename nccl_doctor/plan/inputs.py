"""What the plan is given: ``--params`` in words (``70B``), and the figures a bench or preflight JSON holds.

A file is read defensively: bounded in size, and anything malformed is one line (exit 2), never a traceback.
The figures are bus bandwidths at the largest size measured (the one least bound by latency).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from nccl_doctor.errors import InputError
from nccl_doctor.plan.model import Bandwidths, Figure, Measured

MAX_FILE_BYTES = 64 * 1024 * 1024  # a preflight JSON of a thousand nodes is a few MB
MAX_DEPTH = 8  # where a preflight report nests its ranks' bench data
MAX_PARAMS = 1e15
_SUFFIX = {"": 1.0, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}
_PARAMS = re.compile(r"(\d+(?:\.\d*)?(?:e[+-]?\d+)?)\s*([kmbgt]?)", re.I)


def parse_params(text: str, flag: str = "--params") -> float:
    """``7e9``, ``7B``, ``70B``, ``1.3T``, ``350M`` -> parameters; anything else an InputError naming ``flag``."""
    match = _PARAMS.fullmatch(text.strip())
    value = float(match.group(1)) * _SUFFIX[match.group(2).upper()] if match else math.nan
    if not (1 <= value <= MAX_PARAMS):
        raise InputError(f"{flag}: expected a parameter count such as 7e9, 7B, 1.3T or 350M, got {text!r}")
    return value


def read_document(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``, at most ``MAX_FILE_BYTES``."""
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise InputError(f"--from {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise InputError(f"--from {path}: larger than {MAX_FILE_BYTES // 2**20} MiB, not a bench or preflight JSON")
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"--from {path}: not JSON ({str(exc).splitlines()[0][:120]})") from None
    if not isinstance(doc, dict):
        raise InputError(f"--from {path}: not a bench or preflight JSON report (no object at the top)")
    return doc


def bench_sections(doc: Any, depth: int = 0) -> Iterator[dict[str, Any]]:
    """Every object with a ``results`` list (bench's own report, or the bench data nested in a preflight's)."""
    if depth > MAX_DEPTH:
        return
    if isinstance(doc, dict):
        if isinstance(doc.get("results"), list):
            yield doc
        for value in doc.values():
            yield from bench_sections(value, depth + 1)
    elif isinstance(doc, list):
        for value in doc:
            yield from bench_sections(value, depth + 1)


def _count(section: Mapping[str, Any], key: str) -> int | None:
    value = section.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def _busbw(entry: Any) -> tuple[int, float] | None:
    """(size, busbw) of a good result: a positive finite busbw, no wrong results."""
    if not isinstance(entry, dict):
        return None
    size, bw = entry.get("size_bytes"), entry.get("busbw_gbps")
    if not isinstance(size, int) or not isinstance(bw, (int, float)) or isinstance(bw, bool) or entry.get("wrong"):
        return None
    return (size, float(bw)) if math.isfinite(bw) and bw > 0 else None


def largest(results: list[Any], op: str, group: str, origin: str) -> Figure | None:
    """The busbw at the largest size measured for ``op`` on ``group``, sourced; its source says when the
    report marks that size latency-bound (then every size is, and the figure understates the bandwidth)."""
    found = [(m, e) for e in results if isinstance(e, dict) and e.get("op") == op and e.get("group") == group
             and (m := _busbw(e)) is not None]
    if not found:
        return None
    (size, bw), entry = max(found, key=lambda f: f[0][0])
    bound = " (latency-bound: every size measured is)" if entry.get("latency_bound") is True else ""
    return Figure(value=bw, source=f"{origin}: {op} {group} busbw at {size} bytes{bound}")


def _failure(doc: dict[str, Any], path: str) -> str | None:
    return run_failed(doc.get("command", "run"), doc.get("verdict"), path)


def run_failed(command: object, verdict: object, origin: str) -> str | None:
    """Why the figures cannot be trusted: the run that measured them failed (its verdict)."""
    return f"the {command} in {origin} failed (verdict fail)" if verdict == "fail" else None


def measured(path: Path) -> Measured:
    """Nodes, GPUs per node, the five figures and the run's failure (if it failed) from a bench/preflight JSON."""
    return from_document(read_document(path), str(path))


def from_document(doc: dict[str, Any], origin: str) -> Measured:
    """``measured`` of a report already in memory (``origin`` names it in every figure's source)."""
    return from_bench(next(bench_sections(doc), None), failed=_failure(doc, origin), origin=origin)


def from_bench(section: Mapping[str, Any] | None, *, failed: str | None, origin: str) -> Measured:
    """``measured`` of one bench document (bench's payload, or the one preflight holds): ``failed`` says why
    the run's figures cannot be trusted (its verdict was fail); None for a run without one."""
    if section is not None and not isinstance(section.get("results"), list):
        section = None  # measured nothing
    if section is None and failed:  # a preflight that failed before it measured: the network comes first
        return Measured(nodes=None, gpus_per_node=None, bandwidths=Bandwidths(), failed=failed)
    if section is None:
        raise InputError(f"--from {origin}: no bench results in it (a `bench` or `preflight` --format json report)")
    nodes, per_node = _count(section, "nnodes"), _count(section, "local_world_size")
    cpu_run = cpu_figures(section, origin)
    results = section["results"]
    single = nodes == 1
    intra = "world" if single else "intra"  # on one node the world is the node
    inter_ar = "world" if per_node == 1 else "inter"  # one rank per node: the world is the inter group
    bw = Bandwidths(
        intra_all_gather=largest(results, "all_gather", intra, origin),
        intra_reduce_scatter=largest(results, "reduce_scatter", intra, origin),
        world_all_gather=None if single else largest(results, "all_gather", "world", origin),
        world_reduce_scatter=None if single else largest(results, "reduce_scatter", "world", origin),
        inter_all_reduce=None if single else largest(results, "all_reduce", inter_ar, origin),
    )
    return Measured(nodes=Figure(value=nodes, source=f"{origin}: nnodes") if nodes else None,
                    gpus_per_node=Figure(value=per_node, source=f"{origin}: local_world_size") if per_node else None,
                    bandwidths=bw, failed=failed, cpu_run=cpu_run)


def cpu_figures(section: Mapping[str, Any], origin: str) -> str | None:
    """What says the figures were measured on CPU (bench's ``device``, Gloo's ``backend``), or None. Such
    figures are Gloo's over TCP between processes, not NCCL's between GPUs, and say nothing of GPU memory."""
    device, backend = section.get("device"), section.get("backend")
    if device != "cpu":
        return None
    return f"{origin} holds {backend if isinstance(backend, str) else 'CPU'} figures measured on CPU, not on GPUs"
