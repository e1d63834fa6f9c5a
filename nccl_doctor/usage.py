"""The examples at the end of every command's ``--help``: what a newcomer types first.

Kept out of the command modules so that the CLI builds every sub-parser's help without importing them
(``parse`` and ``probe`` start fast). ``tests/unit/test_usage.py`` parses each example's options with the
command's own parser, so an example cannot name an option that does not exist.
"""

from __future__ import annotations

from typing import NamedTuple

PROGRAM = "nccl-doctor"


class Example(NamedTuple):
    """What it does, then the command line (a launcher or environment may come before ``nccl-doctor``)."""

    what: str
    line: str


EXAMPLES: dict[str, tuple[Example, ...]] = {
    "probe": (
        Example("check this node's interfaces, RDMA ports and NCCL/Gloo settings", "nccl-doctor probe"),
        Example("check the settings a job will run with, failing on warnings too",
                "NCCL_SOCKET_IFNAME=eth0 NCCL_IB_HCA==mlx5_0:1 nccl-doctor probe --strict"),
        Example("save a support bundle here, read it on another machine",
                "nccl-doctor probe --snapshot node1.tar.gz && nccl-doctor probe --root node1.tar.gz"),
    ),
    "parse": (
        Example("diagnose a job's NCCL_DEBUG=INFO output (every rank's lines in one file, or several files)",
                "nccl-doctor parse slurm-1234.out"),
        Example("a directory of per-rank logs, gzipped ones included, with a JSON report for a script",
                "nccl-doctor parse logs/ --json-out parse.json"),
        Example("list the NCCL lines parse does not know yet (to send to the maintainers)",
                "nccl-doctor parse --explain-unknown slurm-1234.out"),
    ),
    "bench": (
        Example("this node alone: one rank per GPU (2 Gloo ranks on CPU without one)", "nccl-doctor bench"),
        Example("every node of a Slurm allocation, one launcher per node",
                "srun --ntasks-per-node=1 nccl-doctor bench --sizes 1M:1G:4"),
        Example("two nodes without Slurm: run on each node, the same endpoint everywhere",
                "nccl-doctor bench --nnodes 2 --rdzv-endpoint node1:29500 --ops all_gather,all_reduce"),
    ),
    "preflight": (
        Example("this node alone, Gloo on CPU (a test box)", "nccl-doctor preflight --cpu"),
        Example("the sbatch gate: every node of the allocation, then the job",
                "srun --ntasks-per-node=1 nccl-doctor preflight --json-out preflight.json && srun python train.py"),
        Example("any other launcher (Kubernetes, mpirun, ssh): say where this node stands",
                "nccl-doctor preflight --nnodes 2 --node-rank 1 --master-addr node1:29500"),
    ),
    "plan": (
        Example("a 70B model on 16 nodes of 8 GPUs: full shard or HSDP, and the communication per step",
                "nccl-doctor plan --params 70B --nodes 16 --gpus-per-node 8 --intra-gbps 360 --inter-gbps 45"),
        Example("from this cluster's own measurements, with the step's compute time",
                "nccl-doctor plan --params 7B --from preflight.json --step-compute-s 1.5"),
    ),
    "explain": (
        Example("what a finding code means, why it matters and the usual fix", "nccl-doctor explain ND102"),
        Example("the same by its name, as JSON", "nccl-doctor explain socket-fallback --format json"),
        Example("every code with its summary", "nccl-doctor explain"),
    ),
}


def epilog(command: str) -> str:
    """The ``examples:`` section of ``command``'s help (for argparse's RawDescriptionHelpFormatter)."""
    lines = ["examples:"]
    for ex in EXAMPLES.get(command, ()):
        lines += [f"  # {ex.what}", f"  {ex.line}"]
    return "\n".join(lines)
