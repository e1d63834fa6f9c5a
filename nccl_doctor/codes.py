"""Every finding code, in one table: stable, never reused, documented in the README.

Ranges: ND0xx general, ND1xx ``parse`` (NCCL logs), ND2xx ``probe`` (interfaces and env),
ND3xx ``bench`` (bandwidth), ND4xx ``preflight`` (cross-node). Each member carries what the README's
table and any ``explain`` show: its name, a one-line summary, why it matters and the usual fix (a
finding's own fix is specific to what was found). ``tests/unit/test_codes.py`` pins the set.
"""

from __future__ import annotations

import re
from pathlib import Path

from nccl_doctor.enums import StrEnum


class Code(StrEnum):
    """A finding code: ``Code.SOCKET_FALLBACK == "ND102"``; JSON shows the value."""

    slug: str
    summary: str
    explanation: str
    fix: str

    def __new__(cls, code: str, slug: str, summary: str, explanation: str, fix: str) -> Code:
        member = str.__new__(cls, code)
        member._value_ = code
        member.slug = slug
        member.summary = summary
        member.explanation = explanation
        member.fix = fix
        return member

    # --- ND0xx: general -------------------------------------------------------------------------------------
    CHECK_SKIPPED = (
        "ND001", "check-skipped", "A check could not run here; the finding says why.",
        "A check that could not run proves nothing either way: a group that was not measured (too few ranks or nodes, "
        "rank counts that do not fit the HSDP mesh) or a skipped NCCL log step leaves that part of the job "
        "unverified. A run that measured nothing at all exits 2 (could not run), never 0.",
        "Give the check what it needs, as the finding says: 2+ ranks per node for intra and 2+ nodes for inter, the "
        "same --nproc-per-node and visible GPUs (CUDA_VISIBLE_DEVICES) on every node, ranks numbered node by node; on "
        "one node use --groups world.",
    )
    # --- ND1xx: parse (NCCL_DEBUG=INFO logs) ----------------------------------------------------------------
    INTER_NODE_TRANSPORT_OK = (
        "ND101", "inter-node-transport-ok",
        "Inter-node traffic runs over RDMA (IB, RoCE, EFA) or the job is on one node.",
        "The channel lines show the fast path: NET/IB (InfiniBand or RoCE), EFA through aws-ofi-nccl or a vendor "
        "plugin between nodes, or, in a single-node job, how its GPUs talk. The message says whether GPUDirect RDMA "
        "(/GDRDMA) was seen too.",
        "Nothing to fix. Where GPUDirect RDMA is not visible in the log, rerun with NCCL_DEBUG=INFO "
        "NCCL_DEBUG_SUBSYS=INIT,NET,ENV and look for /GDRDMA in the `via NET/...` lines.",
    )
    SOCKET_FALLBACK = (
        "ND102", "socket-fallback",
        "Inter-node traffic fell back to NET/Socket (TCP) on hardware that has IB/RoCE/EFA.",
        "NCCL falls back to TCP sockets without an error when it finds no usable RDMA port ('NET/IB : No device "
        "found.' is an INFO line, not a WARN): the job runs, but inter-node collectives move a fraction of the "
        "fabric's bandwidth. Usual causes: NCCL_IB_DISABLE, an NCCL_IB_HCA that matches no ACTIVE port, ports that "
        "are not ACTIVE, or a container without /dev/infiniband.",
        "export NCCL_IB_DISABLE=0 if it is set (the environment wins over nccl.conf); list only ACTIVE ports in "
        "NCCL_IB_HCA (compare `ibstat` / `ibv_devinfo`, e.g. NCCL_IB_HCA==mlx5_0:1); make sure the container sees "
        "/dev/infiniband and has libibverbs with its provider (rdma-core, libmlx5); give every process the same "
        "NCCL_NET, NCCL_IB_DISABLE and NCCL_IB_HCA.",
    )
    SOCKET_TRANSPORT = (
        "ND103", "socket-transport", "Inter-node traffic runs over NET/Socket (TCP) on plain Ethernet.",
        "Without InfiniBand, RoCE or EFA, NCCL moves inter-node data over TCP (NET/Socket) at a fraction of an RDMA "
        "fabric's bandwidth, so multi-node training is network-bound. The log shows no RDMA hardware, or "
        "NCCL_IB_DISABLE hid it, or the aws-ofi-nccl plugin did not initialise.",
        "Train across nodes on an RDMA fabric (InfiniBand, RoCE or EFA); if the nodes have one, export "
        "NCCL_IB_DISABLE=0 or fix EFA (`fi_info -p efa`); on plain Ethernet prefer HSDP (shard within a node, "
        "replicate across nodes) and raise NCCL_SOCKET_NTHREADS / NCCL_NSOCKS_PERTHREAD.",
    )
    GDR_NOT_USED = (
        "ND104", "gdr-not-used", "RDMA is used but GPUDirect RDMA is not: inter-node data is staged in host memory.",
        "Without GPUDirect RDMA the NIC cannot reach GPU memory directly: every inter-node transfer is staged through "
        "host memory, at lower bandwidth (about 16 instead of 24 GB/s on an HDR NIC). NCCL needs a peer-memory module "
        "(nvidia_peermem) or DMA-BUF, and a GPU-NIC path within NCCL_NET_GDR_LEVEL (default PXB).",
        "Load the peer-memory module (`modprobe nvidia_peermem`; `lsmod | grep nvidia_peermem`) or use DMA-BUF "
        "(kernel >= 5.12, NCCL >= 2.13); check the GPU-NIC distance with `nvidia-smi topo -m` (NCCL_NET_GDR_LEVEL=PHB "
        "allows GDR through the CPU host bridge); on EFA set FI_EFA_USE_DEVICE_RDMA=1.",
    )
    INTRA_NODE_DEGRADED = (
        "ND105", "intra-node-degraded", "GPUs of one node talk through SHM or the NIC instead of P2P/NVLink.",
        "With P2P off between GPUs of one node, NCCL moves their data through host shared memory (SHM) or loops it "
        "through the NIC, far below NVLink or PCIe peer-to-peer: the intra-node collectives (FSDP's shard group) slow "
        "down. Causes: NCCL_P2P_DISABLE / NCCL_P2P_LEVEL, ACS/IOMMU settings, or a container without IPC.",
        "Unset NCCL_P2P_DISABLE / NCCL_P2P_LEVEL; check `nvidia-smi topo -m` and the ACS/IOMMU settings; run "
        "containers with --ipc=host (and NCCL_SHM_DISABLE unset).",
    )
    TRANSPORT_NOT_VISIBLE = (
        "ND106", "transport-not-visible", "The log does not show which transport the job used; it cannot be verified.",
        "Without `via NET/...` channel lines or a `Using network` line the log cannot tell RDMA from a TCP fallback, "
        "so the silent fallback (ND102) cannot be ruled out. NCCL 2.22+ connects lazily, at the first collective, and "
        "its default debug subsystems hide some lines.",
        "Rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV (Ray: RAY_DEDUP_LOGS=0), let at least one "
        "collective run, and parse that log.",
    )
    NCCL_VERSION_MISMATCH = (
        "ND107", "nccl-version-mismatch", "Processes of one job run different NCCL versions.",
        "Ranks of one job should run one NCCL build: NCCL checks versions between ranks ('Mismatched NCCL version "
        "detected') and fails init, and a mix means the nodes run different software images.",
        "Install one NCCL version on every node (the same container image / nvidia-nccl wheel); check with `python -c "
        "'import torch; print(torch.cuda.nccl.version())'`.",
    )
    NCCL_WARNING = (
        "ND108", "nccl-warning", "NCCL printed a WARN that is not fatal by itself.",
        "A WARN that did not stop the job often explains a later failure or a slow run (libibverbs missing, CollNet "
        "unavailable, connections retried). Warnings are grouped by kind, with their count and hosts.",
        "Read the quoted line: install rdma-core/libibverbs on nodes with RDMA NICs (`ibv_devices`); unset "
        "NCCL_ALGO=COLLNET when CollNet/SHARP is unavailable; check routing and firewalls on the interface NCCL uses "
        "when connections are retried.",
    )
    IB_COMPLETION_ERROR = (
        "ND109", "ib-completion-error",
        "An IB/RoCE work request completed with an error (e.g. status 12, retry exceeded).",
        "A work request that completes with an error breaks its connection and the collective fails on every rank of "
        "the communicator. Status 12 (transport retry counter exceeded) means the peer stopped answering over the "
        "fabric: a flapping link or cable, or for RoCE the GID, MTU or PFC/ECN; status 5 (flushed) follows an earlier "
        "error.",
        "Check both ports with `ibstat` / `ibdiagnet` (link flaps, cable); for RoCE the GID index (`show_gids`; "
        "NCCL_IB_GID_INDEX=3 is the usual RoCEv2/IPv4 entry), MTU and PFC/ECN; NCCL_IB_TIMEOUT=22 gives a congested "
        "fabric more time; for status 5 or 13 find the first error, often on the peer.",
    )
    CONNECT_FAILED = (
        "ND110", "connect-failed", "A socket connection between ranks failed, timed out or was closed.",
        "Ranks connect to each other over the socket interface NCCL picked (bootstrap, and all data without RDMA); "
        "when it does not route between nodes (virtual, link-local or firewalled), connects fail or time out and the "
        "job hangs at init or dies.",
        "Make sure the nodes reach each other on the interface NCCL uses (ping the peer address, check "
        "firewalls/security groups) and name only the routable one, exactly: NCCL_SOCKET_IFNAME==<interface> (or "
        "exclude virtual ones: NCCL_SOCKET_IFNAME=^docker,lo,veth).",
    )
    RDMA_VERBS_ERROR = (
        "ND111", "rdma-verbs-error", "An RDMA verbs call (ibv_*) or device open failed.",
        "NCCL's IB transport could not open a device, register memory or set up a queue pair, so the communicator "
        "fails before any data moves. Usual causes: ports not ACTIVE, a locked-memory limit below unlimited, an "
        "unroutable RoCE GID, or IB and RoCE ports mixed in one job.",
        "Check the devices with `ibstat` / `ibv_devinfo` (ports ACTIVE) and `ulimit -l` (must be unlimited; Slurm: "
        "PropagateResourceLimits, containers: --ulimit memlock=-1); for RoCE pick a routable GID with "
        "NCCL_IB_GID_INDEX (`show_gids`); select one link type with NCCL_IB_HCA.",
    )
    CUDA_ERROR = (
        "ND112", "cuda-error", "A CUDA call inside NCCL failed (out of memory, driver error...).",
        "A CUDA failure inside NCCL (often out of memory while NCCL allocates its buffers, or a driver problem) fails "
        "the communicator on that rank, and the other ranks then wait for it until they time out.",
        "Out of memory: free GPU memory before creating communicators, or lower NCCL_BUFFSIZE / NCCL_MAX_NCHANNELS; "
        "otherwise check the GPU with `nvidia-smi` and the driver/CUDA versions (`nvidia-smi -q`).",
    )
    NO_SOCKET_INTERFACE = (
        "ND113", "no-socket-interface", "NCCL found no usable network interface for bootstrap or sockets.",
        "NCCL needs an interface with an IP address for bootstrap; when none is usable ('Bootstrap : no socket "
        "interface found'), communicator init fails and the job cannot start.",
        "Set NCCL_SOCKET_IFNAME to an interface that has an IP address (list them with `ip -br addr`), or fix the "
        "value that matches none.",
    )
    WATCHDOG_TIMEOUT = (
        "ND114", "watchdog-timeout", "PyTorch's watchdog timed out a collective: some rank stopped making progress.",
        "PyTorch's watchdog aborts a collective that has not completed within the process group's timeout (10 min by "
        "default for NCCL): some rank never entered or never finished it. The rank missing or failing first is the "
        "cause; the others only waited.",
        "Find the rank that is missing here or failed first; set TORCH_NCCL_DUMP_ON_TIMEOUT=1 and NCCL_DEBUG=INFO; a "
        "hang at a low SeqNum points at connectivity: run `nccl-doctor preflight`.",
    )
    NCCL_ERROR = (
        "ND115", "nccl-error", "NCCL reported a fatal error (internal, system, remote, invalid usage...).",
        "An NCCL call returned an error (internal, system, remote, invalid usage...), so the communicator and the "
        "training step failed. The first WARN of the first failing rank usually names the cause; the rest are "
        "consequences.",
        "Find the first NCCL WARN of the first failing rank (rerun with NCCL_DEBUG=INFO "
        "NCCL_DEBUG_SUBSYS=INIT,NET,ENV if none is shown); an NCCL_SOCKET_IFNAME that names no interface with an "
        "address (`ip -br addr`) must be fixed or unset.",
    )
    OFI_PROVIDER_NOT_EFA = (
        "ND116", "ofi-provider-not-efa", "aws-ofi-nccl selected a TCP libfabric provider instead of EFA.",
        "NCCL reaches EFA only through aws-ofi-nccl; when libfabric picks a TCP provider instead of efa, inter-node "
        "traffic runs over TCP at a fraction of EFA's bandwidth, without an error.",
        "Check the EFA device with `fi_info -p efa` (EFA driver, a security group that allows all traffic to itself); "
        "set FI_PROVIDER=efa so a missing EFA fails loudly.",
    )
    LOG_INPUT_DAMAGED = (
        "ND117", "log-input-damaged", "Part of the input could not be read (truncated gzip, over-long lines).",
        "Only what could be read is diagnosed: a truncated .gz stops early and lines over 16 KiB are cut, so an error "
        "logged in the missing part is not seen.",
        "Copy the log again (`gzip -t FILE` checks a .gz), or make the file readable for this user (`ls -l` it).",
    )
    RANKS_BEHIND = (
        "ND118", "ranks-behind", "Some ranks' watchdog fired at an older collective than the others': they are behind.",
        "When the watchdog fires at different SeqNums of one process group, the ranks at the oldest are behind: the "
        "others finished that collective and wait for them in the next one. The hang started on the ranks behind.",
        "Look at the ranks named first: what they were doing (`py-spy dump --pid PID`, or the flight recorder with "
        "TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1), their GPU (`nvidia-smi`, Xid errors in "
        "`dmesg`), and code that runs a collective on some ranks only.",
    )
    # --- ND2xx: probe (interfaces, NCCL/Gloo environment) ---------------------------------------------------
    PROBE_SUMMARY = (
        "ND200", "probe-summary", "What NCCL (bootstrap, transport) and Gloo will use on this node.",
        "The interface NCCL will bootstrap on, the network that carries its inter-node data (IB ports, a plugin or "
        "TCP sockets) and Gloo's interface, as their own selection rules choose them with this environment.",
        "Nothing to fix; to change a choice, export the NCCL_SOCKET_IFNAME, NCCL_IB_HCA and GLOO_SOCKET_IFNAME values "
        "in the probe's recommended exports.",
    )
    NCCL_ON_MANAGEMENT = (
        "ND201", "nccl-on-management", "NCCL will bootstrap (or send all traffic) over the management interface.",
        "Without NCCL_SOCKET_IFNAME, NCCL takes ib* interfaces first, then any but docker and lo, so it can pick the "
        "slow management port (default route, <= 25 Gb/s) for bootstrap and, without RDMA, for all inter-node "
        "traffic: the job then runs at management-network speed, or times out where that network does not connect the "
        "nodes.",
        "Pin NCCL to a data interface: export NCCL_SOCKET_IFNAME==<data interface> (the probe names the best one).",
    )
    SOCKET_IFNAME_MATCHES_NOTHING = (
        "ND202", "socket-ifname-matches-nothing",
        "NCCL_SOCKET_IFNAME matches no interface with an address: the job cannot start.",
        "When NCCL_SOCKET_IFNAME matches no interface with an IP address, bootstrap finds no socket interface and "
        "NCCL init fails on every rank, often only after a rendezvous or init timeout.",
        "Name an existing interface with an address (`ip -br addr`), exactly: export NCCL_SOCKET_IFNAME==<interface> "
        "(the probe names the best one).",
    )
    SOCKET_IFNAME_DOWN = (
        "ND203", "socket-ifname-down", "NCCL_SOCKET_IFNAME matches only (or also) interfaces that are down.",
        "A down interface cannot carry bootstrap traffic: when it is the only match NCCL cannot bootstrap, and NCCL "
        "before 2.28 may pick a down match even when a running one exists.",
        "Bring the interface up, or name only running ones: export NCCL_SOCKET_IFNAME==<running interface> (the probe "
        "names the best one).",
    )
    SOCKET_IFNAME_IGNORED = (
        "ND204", "socket-ifname-ignored",
        "NCCL_SOCKET_IFNAME is ignored or misread (one character, '=^' order, quotes).",
        "NCCL ignores a one-character NCCL_SOCKET_IFNAME and uses its default choice; '=^eth' reads as the exact name "
        "'^eth', not an exclusion; quotes are kept as part of the name. The job then runs on an interface nobody "
        "chose.",
        "Write it as NCCL reads it: '^' before '=' (NCCL_SOCKET_IFNAME=^=docker0), no quotes (in nccl.conf too), and "
        "a whole name: export NCCL_SOCKET_IFNAME==<interface>.",
    )
    IFNAME_PREFIX_OVERMATCH = (
        "ND205", "ifname-prefix-overmatch",
        "A prefix in NCCL_SOCKET_IFNAME/NCCL_IB_HCA also matches longer names (eth1 -> eth10).",
        "NCCL_SOCKET_IFNAME and NCCL_IB_HCA entries are prefixes unless the list starts with '=': eth1 also selects "
        "eth10 and mlx5_1 also mlx5_10, so NCCL may use interfaces or ports meant to be left out.",
        "Make the match exact with a leading '=': export NCCL_SOCKET_IFNAME==eth1, or NCCL_IB_HCA==mlx5_1.",
    )
    NCCL_ON_VIRTUAL = (
        "ND206", "nccl-on-virtual",
        "NCCL will bootstrap over a virtual or loopback interface other nodes cannot reach.",
        "NCCL's default order leaves out only docker* and lo (and virbr* from 2.28), so a bridge, CNI, tunnel or VPN "
        "interface can become the bootstrap interface; other nodes usually cannot reach it, and loopback they never "
        "can: every multi-node job then fails at init.",
        "Pin a routable interface: export NCCL_SOCKET_IFNAME==<data interface> (the probe names the best one).",
    )
    RDMA_DISABLED_BY_ENV = (
        "ND207", "rdma-disabled-by-env",
        "Active RDMA ports exist but NCCL_IB_DISABLE/NCCL_NET turns NCCL's IB transport off.",
        "NCCL_IB_DISABLE=1 or NCCL_NET=Socket turns NCCL's IB/RoCE transport off although active ports exist, so all "
        "inter-node traffic goes over TCP sockets at a fraction of the fabric's bandwidth; the value often comes from "
        "an old job script or an nccl.conf file.",
        "unset NCCL_IB_DISABLE / NCCL_NET where only the environment sets them; for a value from nccl.conf, export "
        "NCCL_IB_DISABLE=0 (or NCCL_NET=IB), since the environment wins over the file, or delete its line there.",
    )
    IB_HCA_SELECTS_NOTHING = (
        "ND208", "ib-hca-selects-nothing",
        "NCCL_IB_HCA selects none of the active ports: NCCL silently falls back to sockets.",
        "NCCL_IB_HCA filters the ACTIVE ports NCCL may use; when it selects none, NCCL logs 'NET/IB : No device "
        "found.' as INFO, not WARN, and runs all inter-node traffic over TCP sockets.",
        "List the active ports exactly (compare `ibstat`): export NCCL_IB_HCA==<port list the probe prints>, or "
        "change the nccl.conf line that sets it.",
    )
    RDMA_PORT_NOT_ACTIVE = (
        "ND209", "rdma-port-not-active", "An RDMA port is not ACTIVE; NCCL skips it.",
        "NCCL uses only ACTIVE ports, so a port that is DOWN, INIT or ARMED takes its bandwidth out of the node; on a "
        "GPU node with no ACTIVE IB/RoCE port at all NCCL falls back to TCP sockets without a warning.",
        "Check each port with `ibstat` (State Active, Physical state LinkUp), the cable and switch port, and that a "
        "subnet manager answers (`sminfo`; RoCE: the switch port and `ethtool <netdev>`); until it is fixed, exclude "
        "it with NCCL_IB_HCA=^=<hca>:<port>.",
    )
    RDMA_PORT_SLOW = (
        "ND210", "rdma-port-slow", "An active RDMA port runs below the rate of its peers on the node.",
        "A port that trained at a lower rate (a bad cable, transceiver or lane) is used like the others, and every "
        "ring through it runs at its speed, so collectives across nodes slow down.",
        "Reseat or replace the cable or transceiver; check the lanes and errors with `mlxlink -d <pci>`.",
    )
    ROCE_GID_UNUSABLE = (
        "ND211", "roce-gid-unusable", "A RoCE port has no usable GID (or NCCL_IB_GID_INDEX points at a wrong one).",
        "RoCE traffic is addressed by GID: without a RoCE v2 GID of the address family NCCL uses (no IP address on "
        "the netdev), or with NCCL_IB_GID_INDEX pointing at another entry, connections between nodes fail.",
        "Assign an IP address to the RoCE netdev and list the GIDs with `show_gids`; export NCCL_IB_GID_INDEX=<index "
        "of a usable GID> (the probe names one), or unset NCCL_IB_GID_INDEX.",
    )
    BOND_SLAVE_DOWN = (
        "ND212", "bond-slave-down", "A bond has a down member and runs degraded.",
        "A bond with a down member still passes traffic, but with less bandwidth and no redundancy, so collectives "
        "over it slow down without any error.",
        "Check the members' links: cat /proc/net/bonding/<bond>, the cables and switch ports.",
    )
    GPU_NIC_NUMA_MISMATCH = (
        "ND213", "gpu-nic-numa-mismatch", "A GPU's nearest NIC is on another NUMA node.",
        "When a GPU's nearest NIC sits on another NUMA node, GPUDirect RDMA traffic crosses the CPU interconnect; "
        "with the default NCCL_NET_GDR_LEVEL (PXB) NCCL then leaves GDR off for that path, and inter-node bandwidth "
        "drops.",
        "Place NICs and GPUs on the same socket (`nvidia-smi topo -m` shows the paths), or accept the lower "
        "bandwidth.",
    )
    GDR_PREREQUISITES_MISSING = (
        "ND214", "gdr-prerequisites-missing",
        "GPUs and RDMA exist but neither a peer-memory module nor DMA-BUF is available.",
        "GPUDirect RDMA needs the nvidia_peermem (or nv_peer_mem) module, or DMA-BUF (open kernel module >= 515 on "
        "kernel >= 5.12); without either NCCL stages every inter-node transfer through host memory (no /GDRDMA), at "
        "lower bandwidth.",
        "modprobe nvidia_peermem (check `lsmod | grep nvidia_peermem`), or use the open kernel module >= 515 on "
        "kernel >= 5.12 for DMA-BUF.",
    )
    GLOO_BINDS_LOOPBACK = (
        "ND215", "gloo-binds-loopback",
        "With GLOO_SOCKET_IFNAME unset, Gloo will bind loopback (hostname resolves to 127.x).",
        "With GLOO_SOCKET_IFNAME unset Gloo binds the address the hostname resolves to; when that is 127.x, Gloo "
        "groups across nodes (torch's CPU collectives) fail with 'Connection refused, remote=[127.0.0.1]'.",
        "export GLOO_SOCKET_IFNAME=<inter-node interface> (the probe names the best one).",
    )
    GLOO_IFNAME_INVALID = (
        "ND216", "gloo-ifname-invalid",
        "GLOO_SOCKET_IFNAME names an interface that is missing, has no address, is down, or is loopback/virtual.",
        "GLOO_SOCKET_IFNAME takes exact names only (no prefixes, no '^') and Gloo uses every listed interface in "
        "turn: a missing name fails with 'Unable to find address for', and a down, loopback or virtual one makes Gloo "
        "pairs across nodes fail or hang.",
        "export GLOO_SOCKET_IFNAME=<interface>, with exact names of routable interfaces only (the probe names the "
        "best one, or the list without the bad entry).",
    )
    ENV_NOT_INTEGER = (
        "ND217", "env-not-integer",
        "An integer NCCL variable has a non-integer value that NCCL silently reads as a number.",
        "NCCL parses integer variables like strtoll with no error check, so a word reads as 0: NCCL_IB_DISABLE=true "
        "leaves IB enabled and NCCL_P2P_DISABLE=yes does nothing. The setting silently means something else than "
        "written.",
        "Write a number (NCCL_<X>_DISABLE=1 to disable, 0 for the default) or unset the variable; in nccl.conf put "
        "comments on their own line ('#' starts a comment only in column 0).",
    )
    ENV_VALUE_IGNORED = (
        "ND218", "env-value-ignored", "An NCCL variable has a value NCCL ignores (unknown level name, out of range).",
        "NCCL ignores a value it does not recognise and keeps its default, without a warning: path levels are "
        "case-sensitive names (PXB, not pxb; nvidia-smi's NODE is PHB), NCCL_DEBUG takes VERSION, WARN, INFO, TRACE "
        "or ABORT, NCCL_CROSS_NIC 0-2, and only NCCL_P2P_DISABLE=1 disables P2P.",
        "Use a value NCCL knows: NCCL_NET_GDR_LEVEL / NCCL_P2P_LEVEL in upper case (e.g. PXB or PHB), "
        "NCCL_DEBUG=INFO, NCCL_CROSS_NIC=0, 1 or 2; or unset the variable.",
    )
    ENV_UNKNOWN_NAME = (
        "ND219", "env-unknown-name", "An NCCL_* name NCCL does not read (typo, deprecated PyTorch name).",
        "NCCL and Gloo ignore names they do not read, so a misspelt name, one NCCL never had (NCCL_TIMEOUT), a "
        "pre-2.2 PyTorch name (NCCL_ASYNC_ERROR_HANDLING, now TORCH_NCCL_ASYNC_ERROR_HANDLING) or 'NAME = value' with "
        "spaces in nccl.conf leaves the intended setting unset.",
        "Rename it to the variable meant (the finding's did-you-mean, or TORCH_<name> for the PyTorch ones) and unset "
        "the wrong name, or fix its line in the conf file; for a collective timeout set "
        "init_process_group(timeout=...) in PyTorch.",
    )
    NCCL_CONF_FILE = (
        "ND220", "nccl-conf-file",
        "Settings injected by nccl.conf files (NCCL_CONF_FILE, ~/.nccl.conf, /etc/nccl.conf), "
        "or an NCCL_CONF_FILE that does not exist.",
        "NCCL reads NCCL_CONF_FILE (else ~/.nccl.conf) and /etc/nccl.conf at init, below the environment, and keeps "
        "values verbatim: quotes and the carriage return of CRLF line ends become part of the value. Such settings "
        "are easy to forget, and an NCCL_CONF_FILE that does not exist is ignored silently.",
        "Remove quotes from the file's values, convert CRLF files (dos2unix FILE), and point NCCL_CONF_FILE at an "
        "existing file or unset it.",
    )
    P2P_OR_SHM_DISABLED = (
        "ND221", "p2p-or-shm-disabled", "NCCL_P2P_DISABLE=1 or NCCL_SHM_DISABLE=1 slows intra-node collectives.",
        "NCCL_P2P_DISABLE=1 turns off NVLink/PCIe peer-to-peer inside the node and NCCL_SHM_DISABLE=1 the "
        "shared-memory transport: GPUs of one node fall back to slower paths, and the intra-node collectives (FSDP's "
        "all-gathers and reduce-scatters) slow down a lot.",
        "unset NCCL_P2P_DISABLE and NCCL_SHM_DISABLE (export them as 0 when an nccl.conf file sets them).",
    )
    NCCL_NET_UNAVAILABLE = (
        "ND222", "nccl-net-unavailable", "NCCL_NET names a network that is not usable here: NCCL init fails.",
        "NCCL_NET forces one network (IB, Socket or a plugin's name); when that network does not initialise here NCCL "
        "does not fall back: init fails ('Error: network X not found' / 'Failed to initialize any NET plugin') on "
        "every rank.",
        "unset NCCL_NET so NCCL chooses, or set the name meant (IB, Socket, or the installed plugin's name); for IB, "
        "make an RDMA port ACTIVE and check NCCL_IB_DISABLE / NCCL_IB_HCA.",
    )
    NAMED_LIKE_IB = (
        "ND223", "named-like-ib", "An interface named like InfiniBand (ib*) is not IPoIB.",
        "NCCL's default choice prefers interfaces whose name starts with 'ib', so an Ethernet or virtual interface "
        "named ib* can be picked as if it were the InfiniBand (IPoIB) one.",
        "Rename the interface, or set NCCL_SOCKET_IFNAME to the real fabric interface.",
    )
    NCCL_FINDS_NO_INTERFACE = (
        "ND224", "nccl-finds-no-interface", "NCCL's default choice finds no running interface with an address.",
        "With NCCL_SOCKET_IFNAME unset NCCL still needs a running interface with an IP address for bootstrap; with "
        "none ('Bootstrap : no socket interface found') every NCCL job fails at init.",
        "Bring up an interface with an IP address (`ip -br addr`) and pin it: export NCCL_SOCKET_IFNAME==<interface>.",
    )
    EFA_NEEDS_PLUGIN = (
        "ND225", "efa-needs-plugin", "EFA devices present: NCCL needs the aws-ofi-nccl plugin to use them.",
        "NCCL's built-in IB transport ignores EFA devices: only the aws-ofi-nccl plugin (libfabric) drives them, and "
        "without it NCCL uses TCP sockets between nodes.",
        "Install aws-ofi-nccl and check with NCCL_DEBUG=INFO that the log says 'Using network Libfabric'.",
    )
    NO_RDMA = (
        "ND226", "no-rdma", "No RDMA device: inter-node NCCL traffic will use TCP sockets.",
        "Without InfiniBand, RoCE or EFA, NCCL moves all inter-node data over TCP sockets at a fraction of an RDMA "
        "fabric's bandwidth, so multi-node GPU training is network-bound. On a CPU-only node (PASS) only Gloo runs, "
        "over TCP anyway.",
        "Run multi-node GPU training on nodes with an RDMA fabric; on plain Ethernet prefer HSDP and raise "
        "NCCL_SOCKET_NTHREADS / NCCL_NSOCKS_PERTHREAD.",
    )
    # --- ND3xx: bench (bandwidth) ---------------------------------------------------------------------------
    BANDWIDTH_OK = (
        "ND300", "bandwidth-ok", "Every collective returned correct data and no node or link stands out.",
        "Every collective returned correct data and no node or link stands out: after a node-pair pass, no pair is "
        "below a quarter of the best pair or under the floor (25% of the line rate on NCCL, 5% on Gloo).",
        "Nothing to fix; the tables show each figure against the expected bandwidth (% of expected).",
    )
    WRONG_RESULTS = (
        "ND301", "wrong-results", "A collective returned wrong elements (like nccl-tests' #wrong).",
        "Wrong elements from a collective corrupt gradients and parameters silently: training goes on with bad "
        "numbers. It points at a faulty GPU, memory or link, not at a setting.",
        "Rerun with NCCL_DEBUG=WARN, check dmesg for Xid/ECC errors on the hosts (for a node pair, both ends and the "
        "link between them), and drain a host if it repeats.",
    )
    SLOW_NODE_BANDWIDTH = (
        "ND302", "slow-node-bandwidth",
        "A node is slow with every partner, one of them proven good elsewhere (pair pass).",
        "Collectives run at the pace of their slowest member, so one node with a degraded link slows every step of a "
        "data-parallel job. A node is named only when it is slow with every partner and one of them is proven good "
        "with another node.",
        "Drain the node (`scontrol update nodename=HOST state=drain reason=slow-link`) and check its link: `ethtool "
        "<iface>`, `tc qdisc show dev <iface>`, the cable and switch port.",
    )
    SLOW_LINK_UNPINNED = (
        "ND303", "slow-link-unpinned",
        "A node pair is slow but neither end can be blamed (two nodes, or no known-good peer).",
        "A slow node pair slows every collective that crosses it, but with two nodes, or no partner proven good, the "
        "pair pass cannot tell which end is slow; when every pair is slow the transport or the fabric is, not one "
        "node.",
        "Rerun with a third node (the pair pass then names the slow node), or check both ends: `ethtool <iface>`, `tc "
        "qdisc show`, switch port counters; when every pair is slow, check the interface (`nccl-doctor probe`) and "
        "the transport NCCL used (`nccl-doctor parse` on an NCCL_DEBUG=INFO log).",
    )
    ABOVE_LINK_RATE = (
        "ND305", "above-link-rate", "A figure exceeds the link's line rate, so it is not that link's figure.",
        "An inter-node figure above the line rate of the interface it is compared with means the traffic took another "
        "path, so it says nothing about that link.",
        "Set GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME to the interface to test, and rerun.",
    )
    SIZES_TOO_SMALL = (
        "ND306", "sizes-too-small", "The largest size tested is too small to reach the bandwidth.",
        "Small messages are latency-bound and never reach a link's bandwidth, so a sweep that stops below 256 MiB "
        "(NCCL) or 16 MiB (Gloo) understates it and can make a healthy fabric look slow.",
        "Rerun with --sizes up to at least 256M on NCCL (16M on Gloo), e.g. --sizes 1M:1G:4.",
    )
    TOO_FEW_ITERATIONS = (
        "ND307", "too-few-iterations", "Too few timed iterations per size for a stable figure.",
        "With fewer than 5 timed iterations per size one slow iteration dominates the figure, which then varies from "
        "run to run.",
        "Rerun with --iters 5 or more, or leave --iters unset (5-50 by size).",
    )
    WORLD_SIZE_MISMATCH = (
        "ND308", "world-size-mismatch", "The bench ran on fewer nodes or ranks than Slurm allocated.",
        "Figures from fewer nodes or ranks than Slurm allocated leave the other nodes and their links untested, so "
        "they do not speak for the allocation.",
        "Run `srun --ntasks-per-node=1 nccl-doctor bench` inside the allocation, without --nnodes/--nproc-per-node.",
    )
    DEADLINE_EXPIRED = (
        "ND309", "deadline-expired", "The run passed its deadline; the finding names the stage that hung.",
        "The run was stopped at its --timeout while some ranks were stuck: the stage (start-up, rendezvous, init, a "
        "collective, a pair round) and the ranks that never reached it name the hang. Stage start-up means the "
        "deadline was shorter than starting torchrun and importing torch.",
        "By stage: start-up, a longer --timeout; rendezvous, start nccl-doctor on every node (`srun "
        "--ntasks-per-node=1 nccl-doctor bench`) with the same --rdzv-endpoint, reachable from every node; init, "
        "check the interfaces in GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME (`nccl-doctor probe`) and the firewalls; "
        "else rerun with NCCL_DEBUG=INFO and drain a host that hangs again.",
    )
    COLLECTIVE_FAILED = (
        "ND310", "collective-failed", "A collective failed or timed out; the finding names the ranks missing.",
        "A stage that fails on one rank leaves the others waiting; the ranks that never reached it are usually where "
        "the problem is. Buffers that do not fit in memory are the sizes asked for, not the cluster: that run could "
        "not run (exit 2).",
        "Check that every node reaches the others on GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME (`nccl-doctor probe`) "
        "and that firewalls allow the ephemeral ports; rerun with NCCL_DEBUG=INFO and read the named hosts first; out "
        "of memory: smaller --sizes.",
    )
    LAUNCH_FAILED = (
        "ND311", "launch-failed", "The launcher or its workers exited before reporting a verdict.",
        "torchrun or its workers exited before a verdict (a store torchrun cannot host or reach, a worker that "
        "crashed), so nothing was judged; the finding's line and the worker log say why.",
        "Read the error and the worker log (its path is in the notes and `worker_log`); for a rendezvous failure "
        "start nccl-doctor on every node with the same --rdzv-endpoint and check that its port is reachable from "
        "every node.",
    )
    BELOW_EXPECTED = (
        "ND312", "below-expected",
        "A group or rail is below what it should reach (NCCL: half its yardstick; any: a rail far behind the rest).",
        "Yardsticks: NCCL's NVLink/PCIe figure for the GPU model, the RDMA ports the probe sees (one NIC per rail); "
        "below half means a dead NVLink (SHM/PCIe fallback), a slow NIC or cable on one rail, or the wrong transport. "
        "A rail far behind rails sharing its link is a lagging rank. Names figure, yardstick, pair, rail and NIC.",
        "Intra-node: `nvidia-smi topo -m`, `nvidia-smi nvlink -s`, NCCL_DEBUG=INFO (`nccl-doctor parse`); a rail: "
        "`ibstat` / `ethtool` on the named NIC at both ends, its cable and switch port.",
    )
    CUDA_UNUSABLE = (
        "ND313", "cuda-unusable", "GPUs are expected but CUDA cannot serve every rank: nothing ran.",
        "torch.cuda.is_available() is False with only a warning when CUDA cannot start (error 802: the fabric "
        "manager of an NVSwitch node is down; a driver older than torch's CUDA; a CPU-only torch build), so ranks "
        "sized by the GPUs would silently run Gloo, and nodes on different backends hang. A node with fewer GPUs "
        "than ranks per node fails the same way. The finding quotes CUDA's own error.",
        "Run `nvidia-smi` on the node (it must list every GPU without an error); error 802 on NVSwitch nodes: start "
        "nvidia-fabricmanager (its version must match the driver's); a CPU-only or too new torch: install the CUDA "
        "build matching the driver; fewer GPUs than ranks: --nproc-per-node or CUDA_VISIBLE_DEVICES; --cpu tests "
        "the network with Gloo only.",
    )
    # --- ND4xx: preflight (cross-node) ----------------------------------------------------------------------
    VERSION_MISMATCH = (
        "ND401", "version-mismatch", "torch, NCCL, CUDA or driver versions differ between nodes (pass: all agree).",
        "Nodes of one job should run one torch/NCCL/CUDA build: NCCL fails init on mismatched versions between ranks, "
        "and a mix means different software per node. A different GPU driver is a WARN; PASS when all agree.",
        "Install the same torch/NCCL/CUDA build on every node (one container image or venv); update the GPU driver on "
        "the odd nodes, or drain them.",
    )
    SETTING_MISMATCH = (
        "ND402", "setting-mismatch", "An NCCL_*/GLOO_* setting differs between nodes, or is unset on some.",
        "An NCCL_*/GLOO_* setting that differs between nodes, or is unset on some, makes nodes choose different "
        "interfaces or transports: ranks then fail to connect, or run on the slower choice.",
        "Export the same value on every node in the job script (or set it in /etc/nccl.conf everywhere).",
    )
    NIC_MISMATCH = (
        "ND403", "nic-mismatch", "The NIC inventory, link state or link rate differs between nodes.",
        "A node whose NIC inventory, link state or link rate differs from the others has a missing, down or slower "
        "link, and collectives run at the pace of the slowest node.",
        "Check the odd nodes' links (`ip link`, `ibstat`) and cabling, or drain them.",
    )
    NET_PLUGIN_MISMATCH = (
        "ND404", "net-plugin-mismatch", "Nodes would load different NCCL net plugins.",
        "Nodes that would load different NCCL net plugins (or none) pick different networks, while every rank of a "
        "communicator must speak the same one to connect.",
        "Install the same NCCL net plugin on every node, or unset NCCL_NET_PLUGIN everywhere.",
    )
    NODE_MISSING = (
        "ND405", "node-missing", "Nodes of the allocation never arrived at the rendezvous; they are named.",
        "A node that never reaches the rendezvous would hold a training job at init until its timeout; preflight "
        "names it after --rendezvous-timeout instead. It was not started, started late, or cannot reach node 0's "
        "port.",
        "Start preflight on every node (`srun --ntasks-per-node=1 nccl-doctor preflight`) and check that every node "
        "reaches the first node's port (firewall, hostname resolution); for a late node find why it started late, or "
        "raise --rendezvous-timeout.",
    )
    STAGE_FAILED = (
        "ND406", "stage-failed", "A stage failed or passed its deadline; names the stage and the ranks behind.",
        "A stage that fails or passes its deadline (init, a collective on the HSDP mesh, a pair round) would stop or "
        "hang the training job the same way. The finding names the rank that failed first, the ranks behind, and a "
        "node whose own probe explains a failed connection; a rendezvous port held by another program is one too.",
        "Check that every node reaches the others on GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME (`nccl-doctor probe` on "
        "each) and that firewalls allow the ephemeral ports; read the named hosts first (dmesg, the NCCL log) and "
        "drain one that fails again; for a busy port pass a free one with --port (or MASTER_PORT).",
    )
    NODE_LOST = (
        "ND407", "node-lost", "A node stopped responding mid-run (no heartbeat); the others stopped fast.",
        "A node that stops sending heartbeats mid-run (crashed, rebooted, OOM-killed or cut off) would hang the whole "
        "job at its next collective; preflight names it within seconds and the other nodes stop.",
        "Check the node (dmesg, `scontrol show node`) and drain it before the job (`scontrol update nodename=HOST "
        "state=drain reason=preflight`).",
    )
    RANK_COUNT_MISMATCH = (
        "ND408", "rank-count-mismatch",
        "Nodes would start different numbers of ranks (GPUs, --nproc-per-node): none starts.",
        "Global ranks are numbered assuming one count per node: nodes that would start different numbers (a lost GPU, "
        "another --nproc-per-node) would collide and cannot form the HSDP mesh, so no rank is started.",
        "Start the same number of ranks on every node: request the same GPUs per node (`--gpus-per-node`), check what "
        "the odd nodes see (`nvidia-smi -L`, CUDA_VISIBLE_DEVICES), or pass one --nproc-per-node everywhere; drain a "
        "node that lost a GPU.",
    )
    FSDP_SMOKE = (
        "ND410", "fsdp-smoke", "The FSDP2 + DCP training smoke test failed on some rank (pass: it ran).",
        "The smoke test runs what the job will: FSDP2 fully_shard on the (dp, fsdp) mesh, bf16 steps and a DCP "
        "save/load round trip; a failure there (such as a checkpoint directory that the nodes do not share) would "
        "stop the training or its first checkpoint.",
        "Put the checkpoint directory on a shared file system (--fsdp-smoke-dir); otherwise rerun with "
        "TORCH_DISTRIBUTED_DEBUG=DETAIL and NCCL_DEBUG=INFO on the named rank.",
    )


CODES: dict[str, Code] = {c.value: c for c in Code}
README_BEGIN, README_END = "<!-- CODES -->", "<!-- /CODES -->"


def markdown_table() -> str:
    """The README's table of codes, generated so the two cannot drift."""
    lines = ["| code | name | meaning |", "|---|---|---|"]
    lines += [f"| `{c.value}` | `{c.slug}` | {c.summary} |" for c in Code]
    return "\n".join(lines)


def update_readme(path: str = "README.md") -> None:
    """Rewrite the table between the README's ``<!-- CODES -->`` markers."""
    readme = Path(path)
    block = f"{README_BEGIN}\n{markdown_table()}\n{README_END}"
    pattern = re.escape(README_BEGIN) + r".*?(" + re.escape(README_END) + r"|\Z)"
    text = re.sub(pattern, lambda _: block, readme.read_text(), count=1, flags=re.S)
    readme.write_text(text)


if __name__ == "__main__":
    update_readme()
