"""aws-ofi-nccl's provider line (``NET/OFI Selected Provider is %s (found %d nics)``, src/nccl_ofi_net.c):
only a TCP core provider (tcp, sockets, udp) is the ND116 fallback; cxi, verbs, psm3 and opx are RDMA fabrics
and are named as such. The runs are the healthy EFA fixture with the provider aws-ofi-nccl printed replaced:
every other line is NCCL's own, unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from nccl_doctor.logs.diagnosis import ofi
from nccl_doctor.logs.diagnosis.diagnose import diagnose
from nccl_doctor.logs.parse.api import parse_lines
from nccl_doctor.report import Report

FIXTURE = Path(__file__).resolve().parents[3] / "fixtures" / "logs" / "ofi-efa-healthy-run-torn-down.log"
PROVIDER_FORMAT = "NET/OFI Selected Provider is {} (found 4 nics)"


def _run_with(provider: str) -> Report:
    text = FIXTURE.read_text().replace(PROVIDER_FORMAT.format("efa"), PROVIDER_FORMAT.format(provider))
    assert PROVIDER_FORMAT.format(provider) in text
    return diagnose(parse_lines(text.splitlines(), name="job.log"))


@pytest.mark.parametrize(("provider", "fabric"), [
    ("cxi", "HPE Slingshot (cxi)"), ("verbs;ofi_rxm", "InfiniBand/RoCE verbs"), ("psm3", "RoCE/Ethernet PSM3"),
    ("opx", "Omni-Path Express (opx)"), ("efa", "EFA")])
def test_an_rdma_provider_passes_and_is_named(provider: str, fabric: str) -> None:
    report = _run_with(provider)
    assert "ND116" not in {f.code for f in report.findings}
    assert report.verdict.value == "pass", report.summary
    [ok] = [f for f in report.findings if f.code == "ND101"]
    assert ok.message.startswith(f"inter-node traffic uses {fabric}/libfabric (aws-ofi-nccl)"), ok.message


@pytest.mark.parametrize("provider", ["tcp;ofi_rxm", "sockets", "udp;ofi_rxd", "TCP"])
def test_a_tcp_provider_fails_nd116(provider: str) -> None:
    report = _run_with(provider)
    [f] = [f for f in report.findings if f.code == "ND116"]
    assert f.severity.value == "fail" and f"provider '{provider}'" in f.message


def test_a_provider_nobody_knows_is_not_called_tcp() -> None:
    """A new provider could be anything: no ND116 (a false FAIL drains good nodes), and its name is shown."""
    report = _run_with("frobnic")
    assert "ND116" not in {f.code for f in report.findings}
    assert any("libfabric frobnic (aws-ofi-nccl)" in f.message for f in report.findings)


def test_core_provider_of_a_layered_name() -> None:
    assert [ofi.core(p) for p in ("tcp;ofi_rxm", " Verbs;ofi_rxm", "efa")] == ["tcp", "verbs", "efa"]
    assert ofi.over_tcp([]) is False and ofi.fabric("efa-direct") == "EFA"
