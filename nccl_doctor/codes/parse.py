"""ND1xx: ``parse``, what an NCCL_DEBUG=INFO log shows.

The findings that name the hosts their log lines came from are templates (``report.templated``): in
``preflight`` each node parses its own log, so node 0 merges the same NCCL problem on many nodes by its
parameters and renders it again with the nodes' hostlist. A template's ``{on}`` reads `` on <hostlist>`` (or
nothing, for lines without a host); its twin ``<variant>@host`` (``ON_HOST``, made by ``_on_host``) reads
`` on {host}``, the finding's own ``Where.host``, for a log whose lines all came from that one host.
"""

from __future__ import annotations

from collections.abc import Mapping

from nccl_doctor.codes.text import DEFAULT_VARIANT, CodeText

ON_HOST = "@host"  # the suffix of a variant whose ``{on}`` is its finding's own host (`` on {host}``)
ON = "{on}"


def _on_host(messages: Mapping[str, str]) -> dict[str, str]:
    """``messages`` and, for each that names its hosts (``{on}``), the twin that names the finding's host."""
    twins = {name + ON_HOST: text.replace(ON, " on {host}") for name, text in messages.items() if ON in text}
    return {**messages, **twins}

TEXTS: dict[str, CodeText] = {
    "ND101": CodeText(
        "inter-node-transport-ok",
        "Inter-node traffic runs over RDMA (IB, RoCE, EFA) or the job is on one node.",
        (
            "The channel lines show the fast path: NET/IB (InfiniBand or RoCE), EFA through aws-ofi-nccl or a "
            "vendor plugin between nodes, or, in a single-node job, how its GPUs talk. The message says whether "
            "GPUDirect RDMA (/GDRDMA) was seen too. Error lines never make it pass: a log whose only transport "
            "lines are errors is judged by those errors."
        ),
        (
            "Nothing to fix. Where GPUDirect RDMA is not visible in the log, rerun with NCCL_DEBUG=INFO "
            "NCCL_DEBUG_SUBSYS=INIT,NET,ENV and look for /GDRDMA in the `via NET/...` lines."
        ),
    ),
    "ND102": CodeText(
        "socket-fallback",
        "Inter-node traffic fell back to NET/Socket (TCP) on hardware that has IB/RoCE/EFA.",
        (
            "NCCL falls back to TCP sockets without an error when it finds no usable RDMA port ('NET/IB : No "
            "device found.' is an INFO line, not a WARN): the job runs, but inter-node collectives move a "
            "fraction of the fabric's bandwidth. Usual causes: NCCL_IB_DISABLE, an NCCL_IB_HCA that matches no "
            "ACTIVE port, ports that are not ACTIVE, or a container without /dev/infiniband."
        ),
        (
            "export NCCL_IB_DISABLE=0 if it is set (the environment wins over nccl.conf); list only ACTIVE ports "
            "in NCCL_IB_HCA (compare `ibstat` / `ibv_devinfo`, e.g. NCCL_IB_HCA==mlx5_0:1); make sure the "
            "container sees /dev/infiniband and has libibverbs with its provider (rdma-core, libmlx5); give every"
            " process the same NCCL_NET, NCCL_IB_DISABLE and NCCL_IB_HCA."
        ),
        # the fix names the node whose NCCL_IB_HCA matches no port: merged across nodes, their hostlist
        messages={"hca-no-port": "inter-node traffic uses TCP sockets (NET/Socket) although the nodes have RDMA: "
                                 "{signs}",
                  **_on_host({"beside-rdma": "inter-node traffic of {which}{on} uses TCP sockets (NET/Socket) while "
                                             "the rest of the job uses {label}"}),
                  # a node's own log: both transports of the mixed communicator are its own
                  "beside-rdma-mixed": "inter-node traffic of {which} on {host} uses TCP sockets (NET/Socket) while "
                                       "the rest of the job uses {label} (communicator {mixed} is mixed: {family} on "
                                       "{host}; {other} on {host})"},
        fixes={"hca-no-port": "NCCL_IB_HCA={hca} matches no ACTIVE port: compare with `ibstat` (or `ibv_devinfo`) on "
                              "{host} and list only ACTIVE ports (e.g. NCCL_IB_HCA==mlx5_0:1)"},
    ),
    "ND103": CodeText(
        "socket-transport",
        "Inter-node traffic runs over NET/Socket (TCP) on plain Ethernet.",
        (
            "Without InfiniBand, RoCE or EFA, NCCL moves inter-node data over TCP (NET/Socket) at a fraction of "
            "an RDMA fabric's bandwidth, so multi-node training is network-bound. The log shows no RDMA hardware,"
            " or NCCL_IB_DISABLE hid it, or the aws-ofi-nccl plugin did not initialise."
        ),
        (
            "Train across nodes on an RDMA fabric (InfiniBand, RoCE or EFA); if the nodes have one, export "
            "NCCL_IB_DISABLE=0 or fix EFA (`fi_info -p efa`); on plain Ethernet prefer HSDP (shard within a node,"
            " replicate across nodes) and raise NCCL_SOCKET_NTHREADS / NCCL_NSOCKS_PERTHREAD."
        ),
    ),
    "ND104": CodeText(
        "gdr-not-used",
        "RDMA is used but GPUDirect RDMA is not: inter-node data is staged in host memory.",
        (
            "Without GPUDirect RDMA the NIC cannot reach GPU memory directly: every inter-node transfer is staged"
            " through host memory, at lower bandwidth (about 16 instead of 24 GB/s on an HDR NIC). NCCL needs a "
            "peer-memory module (nvidia_peermem) or DMA-BUF, and a GPU-NIC path within NCCL_NET_GDR_LEVEL "
            "(default PXB)."
        ),
        (
            "Load the peer-memory module (`modprobe nvidia_peermem`; `lsmod | grep nvidia_peermem`) or use "
            "DMA-BUF (kernel >= 5.12, NCCL >= 2.13); check the GPU-NIC distance with `nvidia-smi topo -m` "
            "(NCCL_NET_GDR_LEVEL=PHB allows GDR through the CPU host bridge); on EFA set "
            "FI_EFA_USE_DEVICE_RDMA=1."
        ),
    ),
    "ND105": CodeText(
        "intra-node-degraded",
        "GPUs of one node talk through SHM or the NIC instead of P2P/NVLink.",
        (
            "With P2P off between GPUs of one node, NCCL moves their data through host shared memory (SHM) or "
            "loops it through the NIC, far below NVLink or PCIe peer-to-peer: the intra-node collectives (FSDP's "
            "shard group) slow down. Causes: NCCL_P2P_DISABLE / NCCL_P2P_LEVEL, ACS/IOMMU settings, or a "
            "container without IPC."
        ),
        (
            "Unset NCCL_P2P_DISABLE / NCCL_P2P_LEVEL; check `nvidia-smi topo -m` and the ACS/IOMMU settings; run "
            "containers with --ipc=host (and NCCL_SHM_DISABLE unset)."
        ),
    ),
    "ND106": CodeText(
        "transport-not-visible",
        "The log does not show which transport the job used; it cannot be verified.",
        (
            "Without `via NET/...` channel lines or a `Using network` line the log cannot tell RDMA from a TCP "
            "fallback, so the silent fallback (ND102) cannot be ruled out. NCCL 2.22+ connects lazily, at the "
            "first collective, and its default debug subsystems hide some lines."
        ),
        (
            "Rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV (Ray: RAY_DEDUP_LOGS=0), let at least one "
            "collective run, and parse that log."
        ),
    ),
    "ND107": CodeText(
        "nccl-version-mismatch",
        "Processes of one job run different NCCL versions.",
        (
            "Ranks of one job should run one NCCL build: NCCL checks versions between ranks ('Mismatched NCCL "
            "version detected') and fails init, and a mix means the nodes run different software images."
        ),
        (
            "Install one NCCL version on every node (the same container image / nvidia-nccl wheel); check with "
            "`python -c 'import torch; print(torch.cuda.nccl.version())'`."
        ),
        messages=_on_host({"version-mismatch": "NCCL reported mismatched versions between ranks{on}{ranks}"}),
    ),
    "ND108": CodeText(
        "nccl-warning",
        "NCCL printed a WARN that is not fatal by itself.",
        (
            "A WARN that did not stop the job often explains a later failure or a slow run (libibverbs missing, "
            "CollNet unavailable, connections retried). Warnings are grouped by kind, with their count and hosts."
        ),
        (
            "Read the quoted line: install rdma-core/libibverbs on nodes with RDMA NICs (`ibv_devices`); unset "
            "NCCL_ALGO=COLLNET when CollNet/SHARP is unavailable; check routing and firewalls on the interface "
            "NCCL uses when connections are retried."
        ),
        # {went_on}: "; NCCL went on without CollNet" for a CollNet setup NCCL gave up, else ""
        messages=_on_host({DEFAULT_VARIANT: "NCCL warning x{count}{on}: {text}{went_on}"}),
    ),
    "ND109": CodeText(
        "ib-completion-error",
        "An IB/RoCE work request completed with an error (e.g. status 12, retry exceeded).",
        (
            "A work request that completes with an error breaks its connection and the collective fails on every "
            "rank of the communicator. Status 12 (transport retry counter exceeded) means the peer stopped "
            "answering over the fabric: a flapping link or cable, or for RoCE the GID, MTU or PFC/ECN; status 5 "
            "(flushed) follows an earlier error."
        ),
        (
            "Check both ports with `ibstat` / `ibdiagnet` (link flaps, cable); for RoCE the GID index "
            "(`show_gids`; NCCL_IB_GID_INDEX=3 is the usual RoCEv2/IPv4 entry), MTU and PFC/ECN; "
            "NCCL_IB_TIMEOUT=22 gives a congested fabric more time; for status 5 or 13 find the first error, "
            "often on the peer."
        ),
        # the templates of ``logs/errorrules.py``'s rows name their variant; {ranks}: " (ranks 0-3)" or ""
        messages=_on_host({"ib-completion": "IB work completion errors{on} ({times}; {status}{vendor}){ranks}"}),
    ),
    "ND110": CodeText(
        "connect-failed",
        "A socket connection between ranks failed, timed out or was closed.",
        (
            "Ranks connect to each other over the socket interface NCCL picked (bootstrap, and all data without "
            "RDMA); when it does not route between nodes (virtual, link-local or firewalled), connects fail or "
            "time out and the job hangs at init or dies."
        ),
        (
            "Make sure the nodes reach each other on the interface NCCL uses (ping the peer address, check "
            "firewalls/security groups) and name only the routable one, exactly: NCCL_SOCKET_IFNAME==<interface> "
            "(or exclude virtual ones: NCCL_SOCKET_IFNAME=^docker,lo,veth)."
        ),
        messages=_on_host({"connect": "connection between ranks failed{on} ({times}): {first_two}{ranks}"}),
    ),
    "ND111": CodeText(
        "rdma-verbs-error",
        "An RDMA verbs call (ibv_*) or device open failed.",
        (
            "NCCL's IB transport could not open a device, register memory or set up a queue pair, so the "
            "communicator fails before any data moves. Usual causes: ports not ACTIVE, a locked-memory limit "
            "below unlimited, an unroutable RoCE GID, or IB and RoCE ports mixed in one job."
        ),
        (
            "Check the devices with `ibstat` / `ibv_devinfo` (ports ACTIVE) and `ulimit -l` (must be unlimited; "
            "Slurm: PropagateResourceLimits, containers: --ulimit memlock=-1); for RoCE pick a routable GID with "
            "NCCL_IB_GID_INDEX (`show_gids`); select one link type with NCCL_IB_HCA."
        ),
        messages=_on_host({"verbs": "RDMA verbs call failed{on} ({times}): {first}{ranks}"}),
    ),
    "ND112": CodeText(
        "cuda-error",
        "A CUDA call inside NCCL failed (out of memory, driver error...).",
        (
            "A CUDA failure inside NCCL (often out of memory while NCCL allocates its buffers, or a driver "
            "problem) fails the communicator on that rank, and the other ranks then wait for it until they time "
            "out."
        ),
        (
            "Out of memory: free GPU memory before creating communicators, or lower NCCL_BUFFSIZE / "
            "NCCL_MAX_NCHANNELS; otherwise check the GPU with `nvidia-smi` and the driver/CUDA versions "
            "(`nvidia-smi -q`)."
        ),
        messages=_on_host({"cuda": "CUDA failure inside NCCL{on} ({times}): {first}{ranks}"}),
    ),
    "ND113": CodeText(
        "no-socket-interface",
        "NCCL found no usable network interface for bootstrap or sockets.",
        (
            "NCCL needs an interface with an IP address for bootstrap; when none is usable ('Bootstrap : no "
            "socket interface found'), communicator init fails and the job cannot start."
        ),
        (
            "Set NCCL_SOCKET_IFNAME to an interface that has an IP address (list them with `ip -br addr`), or fix"
            " the value that matches none."
        ),
        messages=_on_host({"no-interface": "no usable network interface{on}: {first}{ranks}"}),
    ),
    "ND114": CodeText(
        "watchdog-timeout",
        "PyTorch's watchdog timed out a collective: some rank stopped making progress.",
        (
            "PyTorch's watchdog aborts a collective that has not completed within the process group's timeout (10"
            " min by default for NCCL): some rank never entered or never finished it. The rank missing or failing"
            " first is the cause; the others only waited."
        ),
        (
            "Find the rank that is missing here or failed first; set TORCH_NCCL_DUMP_ON_TIMEOUT=1 and "
            "NCCL_DEBUG=INFO; a hang at a low SeqNum points at connectivity: run `nccl-doctor preflight`."
        ),
    ),
    "ND115": CodeText(
        "nccl-error",
        "NCCL reported a fatal error (internal, system, remote, invalid usage...).",
        (
            "An NCCL call returned an error (internal, system, remote, invalid usage...), so the communicator and"
            " the training step failed. The first WARN of the first failing rank usually names the cause; the "
            "rest are consequences."
        ),
        (
            "Find the first NCCL WARN of the first failing rank (rerun with NCCL_DEBUG=INFO "
            "NCCL_DEBUG_SUBSYS=INIT,NET,ENV if none is shown); an NCCL_SOCKET_IFNAME that names no interface with"
            " an address (`ip -br addr`) must be fixed or unset."
        ),
        messages=_on_host({"nccl-error": "NCCL failed{on} ({times}): {kinds}{retcodes}{ranks}",
                           "trace": "NCCL calls returned errors{on}: {names}"}),
    ),
    "ND116": CodeText(
        "ofi-provider-not-efa",
        "aws-ofi-nccl selected a TCP libfabric provider instead of EFA.",
        (
            "NCCL reaches EFA only through aws-ofi-nccl; when libfabric picks a TCP provider instead of efa, "
            "inter-node traffic runs over TCP at a fraction of EFA's bandwidth, without an error."
        ),
        (
            "Check the EFA device with `fi_info -p efa` (EFA driver, a security group that allows all traffic to "
            "itself); set FI_PROVIDER=efa so a missing EFA fails loudly."
        ),
        messages=_on_host({DEFAULT_VARIANT: "aws-ofi-nccl selected libfabric provider '{provider}', not 'efa'{on}: "
                                            "inter-node traffic runs over TCP"}),
    ),
    "ND117": CodeText(
        "log-input-damaged",
        "Part of the input could not be read (truncated gzip, over-long lines).",
        (
            "Only what could be read is diagnosed: a truncated .gz stops early and lines over 16 KiB are cut, so "
            "an error logged in the missing part is not seen."
        ),
        ("Copy the log again (`gzip -t FILE` checks a .gz), or make the file readable for this user (`ls -l` it)."),
    ),
    "ND118": CodeText(
        "ranks-behind",
        "Some ranks' watchdog fired at an older collective than the others': they are behind.",
        (
            "When the watchdog fires at different SeqNums of one process group, the ranks at the oldest are "
            "behind: the others finished that collective and wait for them in the next one. The hang started on "
            "the ranks behind."
        ),
        (
            "Look at the ranks named first: what they were doing (`py-spy dump --pid PID`, or the flight recorder"
            " with TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1), their GPU (`nvidia-smi`, Xid "
            "errors in `dmesg`), and code that runs a collective on some ranks only."
        ),
    ),
    "ND119": CodeText(
        "log-limits-reached",
        "The input names more hosts, processes, communicators or names than parse keeps: the rest were counted.",
        (
            "parse keeps at most 65,536 hosts, 262,144 processes, 16,384 communicators and 4,096 names per table "
            "(settings, NCCL versions, networks; a 32,768-GPU job has 4,096 hosts, 32,768 processes and a few "
            "thousand communicators), so a log cannot make it take gigabytes. Past a limit, the lines of new "
            "hosts and processes are read without their prefix, new communicators and names are counted, not "
            "analysed: the report covers the first ones."
        ),
        (
            "Check that the input is one job's NCCL log (a concatenation of many jobs, or generated text, "
            "names this many); parse the logs of fewer nodes at a time to see the others."
        ),
    ),
}
