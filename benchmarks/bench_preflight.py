"""Wall time of ``nccl-doctor preflight`` on 2 and 3 namespace nodes (2 Gloo ranks each), by stage.

Runs the real path: a Slurm cluster in network namespaces (tests/helpers/slurm.py), ``examples/preflight.sbatch``
submitted with ``sbatch --wait``, stage timings read from the JSON report. Root only.

    sudo .venv/bin/python benchmarks/bench_preflight.py [--nodes 2 3] [--repeat 1]

Target: under 30 s for 3 nodes x 2 ranks on the 2-core dev box (preflight's own total, ``total``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: tests.helpers from the checkout

from tests.helpers import slurm  # noqa: E402 - after the path above: run as a script from any directory

STAGES = ("probe", "rendezvous", "consistency", "bench", "localise", "run", "nccl-logs", "total")


def one_run(nnodes: int) -> dict:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
               PYTHONWARNINGS="ignore", NCCL_SOCKET_IFNAME="=eth1", GLOO_SOCKET_IFNAME="eth1",
               PREFLIGHT_TIMEOUT="120", SBATCH_GPUS_PER_NODE="0")  # the example asks for 8 GPUs; no gres here
    with slurm.SlurmCluster(nnodes) as sc:
        t0 = time.monotonic()
        rc, out = sc.submit(ROOT / "examples" / "preflight.sbatch", env=env, timeout=180)
        job_s = time.monotonic() - t0
        reports = list(sc.dir.glob("preflight-*.json"))
        doc = json.loads(reports[0].read_text()) if reports else {}
    if rc != 0:
        print(out[-3000:], file=sys.stderr)
    return {"nodes": nnodes, "rc": rc, "verdict": doc.get("verdict"), "job_s": round(job_s, 2),
            **{k: doc.get("timings_s", {}).get(k) for k in STAGES},
            "pair_rounds": len(doc.get("localisation", {}).get("rounds", []))}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, nargs="+", default=[2, 3])
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--json", type=Path, help="also write the rows here")
    args = p.parse_args()
    reason = slurm.can_run_slurm()
    if reason:
        print(f"bench_preflight: skipped: {reason}", file=sys.stderr)
        return 2
    rows = [one_run(n) for n in args.nodes for _ in range(args.repeat)]
    cols = ("nodes", "rc", "verdict", "job_s", *STAGES, "pair_rounds")
    print(" ".join(f"{c:>11}" for c in cols))
    for r in rows:
        print(" ".join(f"{'-' if r[c] is None else r[c]!s:>11}" for c in cols))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0 if all(r["rc"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
