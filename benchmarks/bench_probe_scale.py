"""Time of ``probe`` on a node with many interfaces: 1,000 against 8,000, side by side.

Builds two sysfs/procfs trees in the kernel's layout (``tests/helpers/sysfs_builder``): a DGX H100 (8 IB
ports, a bond) plus N physical Ethernet NICs, each with its PCI function and its own /32 address,
alternating 10 and 100 GbE (so the management rule weighs every one against the others). Then reports, for
each size, the best of ``--repeat`` of: reading the tree (``read_node``), classifying it (``classify``),
and the whole probe with its checks and report (what ``nccl-doctor probe --root`` does). Linear code
shows a ratio near 8 (8x the interfaces); quadratic code near 64 (the classifier was: 8,000 interfaces
took 47 s, ``link_mbps`` called 128M times). Figures are this process's CPU seconds, not wall time, so other
work on a shared box blurs them less.

    python benchmarks/bench_probe_scale.py              # 1,000 vs 8,000 interfaces (minutes: ~300k files built)
    python benchmarks/bench_probe_scale.py --small      # 125 vs 1,000, seconds
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from nccl_doctor.node.classify import classify  # noqa: E402
from nccl_doctor.node.fsreader import FsReader  # noqa: E402
from nccl_doctor.node.model import NodeFacts  # noqa: E402
from nccl_doctor.node.probe import probe_node  # noqa: E402
from nccl_doctor.node.sysfs import read_node  # noqa: E402
from nccl_doctor.node.view import probe_report  # noqa: E402
from tests.helpers import sysfs_builder as b  # noqa: E402

FACTOR = 8
NIC = {"vendor": "0x8086", "device": "0x1592", "class": "0x020000", "driver": "ice", "numa": 0}
SPEEDS = (10_000, 100_000)
ENV = {"HOME": "/nonexistent"}


def spec_with(n: int) -> dict:
    """dgx_h100 plus ``n`` Ethernet NICs ``enp<k>`` on their own PCI functions and /24s."""
    spec = b.dgx_h100()
    for k in range(n):
        bus, dev = 0x80 + k // 256, k % 256
        bdf = f"0001:{bus:02x}:{dev // 8:02x}.{dev % 8}"
        spec["pci"][bdf] = {**NIC, "at": f"pci0001:{bus:02x}/0001:{bus:02x}:00.0"}
        spec["net"].append({"name": f"enp{k}", "pci": bdf, "speed": SPEEDS[k % 2],
                            "addrs": [f"172.{16 + k // 65536}.{k // 256 % 256}.{k % 256}/32"]})
    return spec


def best(fn: Callable[[], object], repeat: int, setup: Callable[[], object] = lambda: None) -> float:
    """The least CPU time of ``repeat`` calls of ``fn`` (each after an untimed ``setup``): CPU, not wall
    time, so that other work on a shared box does not blur the ratio."""
    times = []
    for _ in range(repeat):
        setup()
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return min(times)


def measure(n: int, repeat: int, tmp: Path) -> dict[str, float]:
    root = b.build(spec_with(n), tmp / f"n{n}")
    fresh: list[NodeFacts] = []
    return {
        "read_node": best(lambda: read_node(FsReader(root)), repeat),
        "classify": best(lambda: classify(fresh[-1]), repeat, lambda: fresh.append(read_node(FsReader(root)))),
        "probe + checks + report": best(lambda: probe_report(probe_node(root, ENV)), repeat),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", action="store_true", help="125 vs 1,000 interfaces")
    ap.add_argument("--repeat", type=int, default=2, help="best of this many runs per figure (default 2)")
    args = ap.parse_args(argv)
    small = 125 if args.small else 1000
    sizes = (small, small * FACTOR)
    with tempfile.TemporaryDirectory(prefix="nccl-doctor-bench-probe.") as tmp:
        figures = [measure(n, args.repeat, Path(tmp)) for n in sizes]
    print(f"probe on {sizes[0]:,} vs {sizes[1]:,} extra Ethernet NICs: CPU seconds, best of {args.repeat}")
    print(f"{'phase':<26}{sizes[0]:>12,}{sizes[1]:>12,}{'ratio':>8}   (linear: ~{FACTOR})")
    for key in ("read_node", "classify", "probe + checks + report"):
        lo, hi = figures[0][key], figures[1][key]
        ratio = hi / lo if lo > 0 else float("inf")
        print(f"{key:<26}{lo:>11.3f}s{hi:>11.3f}s{ratio:>8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
