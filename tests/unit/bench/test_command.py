"""bench's entry (``bench.command``): the probe that blocks a pointless launch, the exit code a rank
records for the launcher, and bench's own argument bounds."""

import json
from pathlib import Path

from nccl_doctor.bench import command as bench
from nccl_doctor.bench.busbw import OPS
from nccl_doctor.bench.model import GROUPS
from nccl_doctor.bench.options import BenchOptions
from nccl_doctor.cli import finish, parse_options
from nccl_doctor.cluster.stages import STAGE_DIR_ENV, StageFile, read_stages
from nccl_doctor.outputs import OutputFormat, OutputOptions
from nccl_doctor.report import Report
from tests.helpers import sysfs_builder


def test_bad_interface_variable_blocks_the_launch_before_any_rank_starts(tmp_path):
    """GLOO_SOCKET_IFNAME naming nothing fails in milliseconds with the fix, instead of an init timeout;
    an NCCL-only typo does not stop a Gloo run."""
    root = sysfs_builder.build(sysfs_builder.cloud_vm(), tmp_path)
    cpu = BenchOptions(cpu=True)
    report = bench.launch_blockers(cpu, {"GLOO_SOCKET_IFNAME": "ib9"}, root)
    assert report is not None and report.verdict.value == "fail"
    [f] = report.findings
    assert f.code == "ND216" and f.where.iface == "ib9" and f.fix == "export GLOO_SOCKET_IFNAME=ens5"
    assert report.data["stage"] == "probe" and report.data["localisation"] == {
        "skipped": "not launched: the probe failed"}
    assert bench.launch_blockers(cpu, {"NCCL_SOCKET_IFNAME": "ib9"}, root) is None
    assert bench.launch_blockers(cpu, {}, root) is None


def test_rank0_that_cannot_write_its_output_records_2_for_the_launcher(tmp_path, capsys):
    """The launcher returns the code in the stage file: a failed --json-out write must not leave a 0 there."""
    sf = StageFile(0, "vm", {STAGE_DIR_ENV: str(tmp_path)})
    args = BenchOptions(output=OutputOptions(format="json",
                                             files={OutputFormat.JSON: Path("/proc/nccl-doctor-test.json")}))
    outcome = bench._finish(args, 0, sf, Report(command="bench"), code=0)
    # under the launcher the rank exits 0 and the launcher exits with the recorded code
    assert finish(outcome, "bench", args.output, ()) == 0
    assert [(s.stage, s.code) for s in read_stages(tmp_path)] == [("done", 2)]
    out, err = capsys.readouterr()
    assert json.loads(out)["command"] == "bench"  # the report itself was still printed
    assert err.startswith("nccl-doctor bench: error: cannot write /proc/nccl-doctor-test.json")
    # a rank that is not rank 0 renders nothing and returns the shared code
    other = bench._finish(args, 1, StageFile(1, "vm", {STAGE_DIR_ENV: str(tmp_path)}), Report(command="bench"),
                          code=1)
    assert other.report is None and finish(other, "bench", args.output, ()) == 0
    assert {s.rank: (s.stage, s.code) for s in read_stages(tmp_path)} == {0: ("done", 2), 1: ("done", 1)}
    assert capsys.readouterr().out == ""


def test_ops_and_groups_parse_to_their_names_in_order():
    assert bench.parse_ops("ar,ag,all-gather") == ("all_reduce", "all_gather")
    assert bench.parse_ops(bench.DEFAULT_OPS) == OPS
    assert bench.parse_groups("inter, world,inter") == ("inter", "world")
    assert bench.parse_groups(bench.DEFAULT_GROUPS) == GROUPS


def test_preflight_keeps_its_own_bounds():
    """bench's minimums are bench's: preflight's short timeouts (tests, quick gates) stay valid."""
    _, options = parse_options(["preflight", "--timeout", "5", "--collective-timeout", "1", "--rendezvous-timeout", "1"])
    assert (options.timeout, options.collective_timeout, options.rendezvous_timeout) == (5, 1, 1)
