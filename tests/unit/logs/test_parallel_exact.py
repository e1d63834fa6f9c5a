"""``parse --jobs N`` is exact: for every fixture log and generated logs, split into ranges of many sizes (down
to one line each, so a boundary falls between every two lines), the merged report equals the one-process
report byte for byte in text, JSON and JUnit. The ranges run in this process (no pool) but go through the
workers' pickling, and the test checks that ranges really were merged, not only read in sequence."""

from __future__ import annotations

import importlib.util
import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from nccl_doctor import render
from nccl_doctor.logs.diagnosis.diagnose import diagnose
from nccl_doctor.logs.parse import parallel
from nccl_doctor.logs.parse.api import parse_paths
from nccl_doctor.logs.parse.model import ParseResult

ROOT = Path(__file__).resolve().parents[3]
FIXTURE_LOGS = sorted((ROOT / "fixtures" / "logs").glob("*.log")) + sorted((ROOT / "fixtures" / "nccl-logs").glob("*.log"))
FIXTURE_DIRS = [ROOT / "fixtures" / "logs" / "truncated-rank-files"]
# (bytes per range, split where the printing process changes); 1 byte: every line its own range
SPLITS = [(1, False), (97, False), (700, True), (4096, False), (30_000, True)]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_parse", ROOT / "benchmarks" / "bench_parse.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def in_process(tasks: list[parallel.Task]) -> Iterator[bytes | None]:
    for task in tasks:
        yield parallel.parse_range(task)


def reports(result: ParseResult) -> tuple[str, str, str]:
    report = diagnose(result)
    out = io.StringIO()
    render.render_text(report, render.make_console(out, width=120))
    return out.getvalue(), render.render_json(report), render.render_junit(report)


def parallel_reports(paths: list[Path], range_bytes: int, align: bool) -> tuple[tuple[str, str, str], int]:
    result, merged = parallel.parse_paths_parallel(paths, jobs=2, min_bytes=0, range_bytes=range_bytes,
                                                   align=align, runner=in_process)
    return reports(result), merged


@pytest.mark.parametrize("path", FIXTURE_LOGS + FIXTURE_DIRS, ids=lambda p: p.name)
def test_every_fixture_at_every_split(path):
    want = reports(parse_paths([path]))
    for range_bytes, align in SPLITS:
        got, _ = parallel_reports([path], range_bytes, align)
        assert got == want, (path.name, range_bytes, align)


def test_several_inputs_one_range_each():
    paths = [ROOT / "fixtures" / "logs" / "truncated-rank-files", *FIXTURE_LOGS[:3]]
    want = reports(parse_paths(paths))
    got, merged = parallel_reports(paths, 1 << 30, True)
    assert got == want and merged >= 4


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("gen") / "nccl-4x8.log"
    _bench().generate(path, 4)
    return path


@pytest.mark.parametrize(("range_bytes", "align"), [(1, False), (150, False), (5000, True), (20_000, False),
                                                    (60_000, True)])
@pytest.mark.slow  # a generated log at every split size
def test_generated_log_merges_exactly(generated, range_bytes, align):
    want = reports(parse_paths([generated]))
    got, merged = parallel_reports([generated], range_bytes, align)
    assert got == want
    if align:  # ranges really merged (the others were read in sequence, from the exact state before them)
        assert merged >= 3


def test_ranges_split_where_the_process_changes(generated):
    size = generated.stat().st_size
    starts = parallel.split_points(generated, size, 4)
    data = generated.read_bytes()
    assert len(starts) == 4
    for at in starts[1:]:
        before = data[:at].rstrip(b"\n").rsplit(b"\n", 1)[-1]
        after = data[at:].split(b"\n", 1)[0]
        assert data[at - 1:at] == b"\n" and before.split(b" NCCL")[0] != after.split(b" NCCL")[0]


def test_interleaved_processes_fall_back_exactly(tmp_path):
    """Lines of every process interleaved (one shared stdout): ranges are read in sequence, still exact."""
    lines = (ROOT / "fixtures" / "nccl-logs" / "041-h20-ib-gdrdma-cumem-2node.log").read_text().splitlines()
    path = tmp_path / "interleaved.log"
    path.write_text("\n".join(lines[i] for k in range(2) for i in range(k, len(lines), 2)) + "\n")
    want = reports(parse_paths([path]))
    for range_bytes, align in SPLITS:
        assert parallel_reports([path], range_bytes, align)[0] == want


def test_held_line_across_a_boundary(tmp_path):
    """A long NCCL line hard-wrapped by a terminal, its continuation the first line of the next range."""
    head = "host1:100:100 [0] NCCL INFO "
    long = head + "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB " + "x" * 60
    path = tmp_path / "wrapped.log"
    path.write_text("\n".join([
        head + "NCCL version 2.21.5+cuda12.4",
        long,
        "[4]mlx5_4:1/RoCE ; OOB ib0:10.0.0.1<0>",
        "host2:200:200 [0] NCCL INFO comm 0x1 rank 1 nranks 2 cudaDev 0 nvmlDev 0 busId 1b000 commId 0x9 - Init COMPLETE",
        "host2:200:200 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [send] via NET/IB/0/GDRDMA",
    ]) + "\n")
    want = reports(parse_paths([path]))
    for range_bytes, align in [(1, False), (40, False), (1, True)]:
        got, merged = parallel_reports([path], range_bytes, align)
        assert got == want and merged >= 1


def test_small_inputs_and_one_job_take_the_sequential_path(monkeypatch):
    def no_pool(*_args, **_kwargs):
        raise AssertionError("no worker for a small input")
    monkeypatch.setattr(parallel, "_pool_runner", no_pool)
    path = FIXTURE_LOGS[0]
    want = reports(parse_paths([path]))
    assert reports(parallel.parse_paths_parallel([path], jobs=4)[0]) == want
    assert reports(parallel.parse_paths_parallel([path], jobs=1, min_bytes=0)[0]) == want


def test_streams_and_gz_are_read_in_the_main_process(tmp_path):
    import gzip
    log = FIXTURE_LOGS[1]
    gz = tmp_path / "a.log.gz"
    gz.write_bytes(gzip.compress(log.read_bytes()))
    paths = [FIXTURE_LOGS[0], gz, FIXTURE_LOGS[2]]
    assert [t.index for t in parallel.plan(parallel.resolve_inputs(paths).sources, jobs=2, range_bytes=None,
                                           align=True)] == [0, 2]
    want = reports(parse_paths(paths))
    assert parallel_reports(paths, 300, False)[0] == want
