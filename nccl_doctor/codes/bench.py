"""ND3xx: ``bench``, measured bandwidth judged against the links."""

from __future__ import annotations

from nccl_doctor.codes.text import DEFAULT_VARIANT, CodeText

TEXTS: dict[str, CodeText] = {
    "ND300": CodeText(
        "bandwidth-ok",
        "Every collective returned correct data and no node or link stands out.",
        (
            "Every collective returned correct data and no node or link stands out: after a node-pair pass, no "
            "pair is below a quarter (NCCL) or a tenth (Gloo) of the best pair or under the floor (25% of the line "
            "rate on NCCL, 5% on Gloo)."
        ),
        "Nothing to fix; the tables show each figure against the expected bandwidth (% of expected).",
    ),
    "ND301": CodeText(
        "wrong-results",
        "A collective returned wrong elements (like nccl-tests' #wrong).",
        (
            "Wrong elements from a collective corrupt gradients and parameters silently: training goes on with "
            "bad numbers. It points at a faulty GPU, memory or link, not at a setting."
        ),
        (
            "Rerun with NCCL_DEBUG=WARN, check dmesg for Xid/ECC errors on the hosts (for a node pair, both ends "
            "and the link between them), and drain a host if it repeats."
        ),
    ),
    "ND302": CodeText(
        "slow-node-bandwidth",
        "A node is slow with every partner, one of them proven good elsewhere (pair pass).",
        (
            "Collectives run at the pace of their slowest member, so one node with a degraded link slows every "
            "step of a data-parallel job. A node is named only when it is slow with every partner and one of them"
            " is proven good with another node."
        ),
        (
            "Drain the node (`scontrol update nodename=HOST state=drain reason=slow-link`) and check its link: "
            "`ethtool <iface>`, `tc qdisc show dev <iface>`, the cable and switch port."
        ),
    ),
    "ND303": CodeText(
        "slow-link-unpinned",
        "A node pair is slow but neither end can be blamed (two nodes, or no known-good peer).",
        (
            "A slow node pair slows every collective that crosses it, but with two nodes, or no partner proven "
            "good, the pair pass cannot tell which end is slow; when every pair is slow the transport or the "
            "fabric is, not one node."
        ),
        (
            "Rerun with a third node (the pair pass then names the slow node), or check both ends: `ethtool "
            "<iface>`, `tc qdisc show`, switch port counters; when every pair is slow, check the interface "
            "(`nccl-doctor probe`) and the transport NCCL used (`nccl-doctor parse` on an NCCL_DEBUG=INFO log)."
        ),
    ),
    "ND305": CodeText(
        "above-link-rate",
        "A figure exceeds the link's line rate, so it is not that link's figure.",
        (
            "An inter-node figure above the line rate of the interface it is compared with means the traffic took"
            " another path, so it says nothing about that link. A virtual interface (veth, bridge, macvlan...) has"
            " no line rate (its sysfs speed is nominal): its figures are compared with each other only."
        ),
        "Set GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME to the interface to test, and rerun.",
    ),
    "ND306": CodeText(
        "sizes-too-small",
        "The largest size tested is too small to reach the bandwidth.",
        (
            "Small messages are latency-bound and never reach a link's bandwidth, so a sweep that stops below 256"
            " MiB (NCCL) or 16 MiB (Gloo) understates it and can make a healthy fabric look slow."
        ),
        "Rerun with --sizes up to at least 256M on NCCL (16M on Gloo), e.g. --sizes 1M:1G:4.",
    ),
    "ND307": CodeText(
        "too-few-iterations",
        "Too few timed iterations per size for a stable figure.",
        (
            "With fewer than 5 timed iterations per size one slow iteration dominates the figure, which then "
            "varies from run to run."
        ),
        "Rerun with --iters 5 or more, or leave --iters unset (5-50 by size).",
    ),
    "ND308": CodeText(
        "world-size-mismatch",
        "The bench ran on fewer nodes or ranks than Slurm allocated.",
        (
            "Figures from fewer nodes or ranks than Slurm allocated leave the other nodes and their links "
            "untested, so they do not speak for the allocation."
        ),
        ("Run `srun --ntasks-per-node=1 nccl-doctor bench` inside the allocation, without --nnodes/--nproc-per-node."),
    ),
    "ND309": CodeText(
        "deadline-expired",
        "The run passed its deadline; the finding names the stage that hung.",
        (
            "The run was stopped at its --timeout while some ranks were stuck: the stage (start-up, rendezvous, "
            "init, a collective, a pair round) and the ranks that never reached it name the hang. Stage start-up "
            "means the deadline was shorter than starting torchrun and importing torch."
        ),
        (
            "By stage: start-up, a longer --timeout; rendezvous, start nccl-doctor on every node (`srun "
            "--ntasks-per-node=1 nccl-doctor bench`) with the same --rdzv-endpoint, reachable from every node; "
            "init, check the interfaces in GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME (`nccl-doctor probe`) and the "
            "firewalls; else rerun with NCCL_DEBUG=INFO and drain a host that hangs again."
        ),
    ),
    "ND310": CodeText(
        "collective-failed",
        "A collective failed or timed out; the finding names the ranks missing.",
        (
            "A stage that fails on one rank leaves the others waiting; the ranks that never reached it are "
            "usually where the problem is. Buffers that do not fit in memory are the sizes asked for, not the "
            "cluster: that run could not run (exit 2)."
        ),
        (
            "Check that every node reaches the others on GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME (`nccl-doctor "
            "probe`) and that firewalls allow the ephemeral ports; rerun with NCCL_DEBUG=INFO and read the named "
            "hosts first; out of memory: smaller --sizes."
        ),
    ),
    "ND311": CodeText(
        "launch-failed",
        "The launcher or its workers exited before reporting a verdict.",
        (
            "torchrun or its workers exited before a verdict (a store torchrun cannot host or reach, a worker "
            "that crashed), so nothing was judged; the finding's line and the worker log say why."
        ),
        (
            "Read the error and the worker log (its path is in the notes and `worker_log`); for a rendezvous "
            "failure start nccl-doctor on every node with the same --rdzv-endpoint and check that its port is "
            "reachable from every node."
        ),
    ),
    "ND312": CodeText(
        "below-expected",
        ("A group or rail is below what it should reach (NCCL: FAIL below a quarter of its yardstick, WARN below "
         "half; any: a rail far behind the rest)."),
        (
            "Yardsticks: NCCL's NVLink/PCIe figure for the GPU model (all-reduce with NVLS on its own, the CPUs' "
            "link for PCIe GPUs on two sockets), the RDMA ports the probe sees (one NIC per rail); below a quarter "
            "is broken: a dead NVLink (SHM/PCIe fallback), sockets instead of RDMA; below half a slow NIC or cable "
            "on one rail. Sizes whose per-rank chunk is latency-bound (large clusters) are reported, not judged. "
            "A rail far behind rails sharing its link is a lagging rank. Names figure, yardstick, pair, rail and NIC."
        ),
        (
            "Intra-node: `nvidia-smi topo -m`, `nvidia-smi nvlink -s`, NCCL_DEBUG=INFO (`nccl-doctor parse`); a "
            "rail: `ibstat` / `ethtool` on the named NIC at both ends, its cable and switch port."
        ),
    ),
    "ND313": CodeText(
        "cuda-unusable",
        "GPUs are expected but CUDA cannot serve every rank: nothing ran.",
        (
            "torch.cuda.is_available() is False with only a warning when CUDA cannot start (error 802: the fabric"
            " manager of an NVSwitch node is down; a driver older than torch's CUDA; a CPU-only torch build), so "
            "ranks sized by the GPUs would silently run Gloo, and nodes on different backends hang. A node with "
            "fewer GPUs than ranks per node fails the same way. The finding quotes CUDA's own error."
        ),
        (
            "Run `nvidia-smi` on the node (it must list every GPU without an error); error 802 on NVSwitch nodes:"
            " start nvidia-fabricmanager (its version must match the driver's); a CPU-only or too new torch: "
            "install the CUDA build matching the driver; fewer GPUs than ranks: --nproc-per-node or "
            "CUDA_VISIBLE_DEVICES; --cpu tests the network with Gloo only."
        ),
    ),
    "ND314": CodeText(
        "cpu-starved",
        "A node's ranks have fewer CPUs than they need: the figures measure the CPU, not the network.",
        (
            "Each rank may run only on the CPUs of its affinity (os.sched_getaffinity: Slurm's cpuset, taskset, "
            "a container's cpuset). A Slurm job that asks for no CPUs gets one per task unless the cluster sets "
            "DefCpuPerGPU or the job is --exclusive, and nccl-doctor's one task per node then starts every rank "
            "on that one CPU. An NCCL rank needs two: its own thread launches and waits, and NCCL's proxy thread "
            "drives the network; a Gloo rank (--cpu) needs one. Starved ranks time-slice, and a slow figure "
            "(ND302, ND303, ND312) then blames the fabric for the scheduler."
        ),
        (
            "Give each rank at least two CPUs (one with --cpu): Slurm `--cpus-per-task` of twice the GPUs per "
            "node on the one task per node, or `--exclusive`; a cluster default: DefCpuPerGPU in slurm.conf; "
            "elsewhere widen the cpuset (taskset, the container's CPU set)."
        ),
        messages={DEFAULT_VARIANT: "{ranks} {backend} rank(s) may run on {cpus} CPU(s) ({cpu_list}): "
                                   "{per_rank} per rank, below the {need} a {backend} rank needs; the bandwidth "
                                   "figures of this node measure the CPU, not the network"},
        fixes={DEFAULT_VARIANT: "give each rank at least {need} CPU(s): in Slurm `--cpus-per-task={want}` on the one "
                                "task per node that starts the {ranks} ranks (or `--exclusive`; the cluster default"
                                " is DefCpuPerGPU in slurm.conf); outside Slurm widen the cpuset (`taskset -pc` of "
                                "the launcher, the container's CPU set)"},
    ),
    "ND315": CodeText(
        "gpu-pair-slow",
        "The intra-node GPU-pair pass: a GPU pair far behind its node's best (or a GPU with NVLinks down, NVML).",
        (
            "A node's intra group is one ring over every GPU, so a GPU whose NVLink is dead (NCCL falls back to SHM "
            "or PCIe: 5-15% of NVLink) slows the whole figure without naming the GPU, and one NVLink of 18 lost "
            "(~6%) hides in the noise. On NCCL every GPU exchanges with its ring neighbours (all pairs up to 4 "
            "GPUs): a pair below a quarter of the node's best pair or of its yardstick FAILs, below half its best "
            "WARNs, naming the GPU in every slow pair; NVML's NVLink state (nvidia-ml-py, optional) names a GPU "
            "with fewer links up than its peers (FAIL with none up)."
        ),
        (
            "On the named host: `nvidia-smi nvlink -s` (links up, speed), `nvidia-smi topo -m` (NV18 between every "
            "pair), `nvidia-smi nvlink -e` (errors), `systemctl status nvidia-fabricmanager`; drain it until a "
            "rerun passes (a baseboard or GPU ticket)."
        ),
        messages={
            DEFAULT_VARIANT: "{pairs} on {hosts}: slowest {slowest} GB/s, fastest {fastest} GB/s, none far behind "
                             "its node's best{nvml}",
            "slow-pairs": "{slow} of {total} on {host} slow ({slowest}; the node's best pair {best} GB/s, median "
                          "{median}{yardstick}; {size} ping-pong): {who}",
            "nvlinks": "{gpus} on {host} with fewer NVLinks up than the others' {most} (NVML): {which}: every ring "
                       "through such a GPU runs at its share of the links",
            "wrong": "GPUs {a} and {b} (ranks {rank_a}, {rank_b}) on {host} returned {wrong} wrong elements",
        },
        fixes={
            "slow-pairs": "on {host}: `nvidia-smi nvlink -s` (links up and their speed), `nvidia-smi topo -m` (NV18 "
                          "between every GPU pair), `nvidia-smi nvlink -e` (error counters), the fabric manager "
                          "(`systemctl status nvidia-fabricmanager`); drain {host} until a rerun passes",
            "nvlinks": "on {host}: `nvidia-smi nvlink -s -i <gpu>` and `nvidia-smi nvlink -e`; a hardware ticket for "
                       "the GPU or baseboard; drain {host} until fixed",
            "wrong": "check both GPUs: `nvidia-smi -q -d ECC`, dmesg for Xid errors; drain {host} if it repeats",
        },
    ),
}
