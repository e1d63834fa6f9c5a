"""A third-party net plugin's name is not a transport: it is mapped to the fabric it drives, and kept as
``inter_node.network``. Lines from NCCL's format strings (src/init.cc ``Using network %s``; src/transport/
net.cc ``Channel %02d/%d : %d[%d] -> %d[%d] [send] via NET/%s/%d%s%s``, ``%s`` being the plugin's
``ncclNet->name``): Google's ``FastSocket`` and ``GPUDirectTCPX`` move bytes over TCP, ``gIB`` and a
vendor's ``NCCL RDMA Plugin v6`` over IB verbs, IB or RoCE by the link layer NET/IB's device lines show."""

from __future__ import annotations

import pytest

from nccl_doctor.logs.diagnosis.diagnose import diagnose
from nccl_doctor.logs.parse.api import parse_lines


def _two_nodes(net: str, *, gdr: str = "", devices: str = "") -> list[str]:
    lines = []
    for host, pid, rank, peer in (("a3-0", 1001, 0, 1), ("a3-1", 2001, 1, 0)):
        p = f"{host}:{pid}:{pid} [0] NCCL INFO "
        if devices:
            lines.append(p + f"NET/IB : Using [0]mlx5_0:1/{devices} ; OOB eth0:10.0.0.{rank + 1}<0>")
        lines += [p + f"Using network {net}",
                  p + f"Channel 00/0 : {peer}[0] -> {rank}[0] [receive] via NET/{net}/0{gdr}",
                  p + f"Channel 00/0 : {rank}[0] -> {peer}[0] [send] via NET/{net}/0{gdr}",
                  p + f"comm 0x55{rank}0 rank {rank} nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0x1f - Init COMPLETE"]
    return lines


@pytest.mark.parametrize(("net", "gdr", "devices", "transport"), [
    ("FastSocket", "", "", "Socket"), ("GPUDirectTCPX", "", "", "Socket"),
    ("gIB", "/GDRDMA", "RoCE", "RoCE"), ("gIB", "/GDRDMA", "", "IB"),
    ("NCCL RDMA Plugin v6", "/GDRDMA", "IB", "IB")])
def test_a_plugin_is_its_fabric_and_keeps_its_name(net: str, gdr: str, devices: str, transport: str) -> None:
    report = diagnose(parse_lines(_two_nodes(net, gdr=gdr, devices=devices), name="job.log"))
    inter = report.data["inter_node"]
    assert (inter["transport"], inter["network"]) == (transport, net)
    assert [c["inter_node"]["transport"] for c in report.data["communicators"]] == [transport]
    if transport == "Socket":  # TCP: never "GPUDirect RDMA off" (ND104), it does not apply
        assert inter["gdr"] is None and "ND104" not in {f.code for f in report.findings}
    else:
        assert inter["gdr"] is True and report.verdict.value == "pass", report.summary
