"""ND2xx: ``probe``, this node's interfaces and its NCCL/Gloo settings."""

from __future__ import annotations

from nccl_doctor.codes.text import DEFAULT_VARIANT, CodeText

TEXTS: dict[str, CodeText] = {
    "ND200": CodeText(
        "probe-summary",
        "What NCCL (bootstrap, transport) and Gloo will use on this node.",
        (
            "The interface NCCL will bootstrap on, the network that carries its inter-node data (IB ports, a "
            "plugin or TCP sockets) and Gloo's interface, as their own selection rules choose them with this "
            "environment. A choice that a FAIL of the same report rules out is not named, since a PASS never "
            "carries a failure: Gloo is left out when GLOO_SOCKET_IFNAME names a missing interface (ND216), and "
            "the line is left out when NCCL has no interface at all (ND202, ND203, ND224)."
        ),
        (
            "Nothing to fix; to change a choice, export the NCCL_SOCKET_IFNAME, NCCL_IB_HCA and "
            "GLOO_SOCKET_IFNAME values in the probe's recommended exports."
        ),
    ),
    "ND201": CodeText(
        "nccl-on-management",
        "NCCL will bootstrap (or send all traffic) over the management interface.",
        (
            "Without NCCL_SOCKET_IFNAME, NCCL takes ib* interfaces first, then any but docker and lo, so it can "
            "pick the slow management port (default route, <= 25 Gb/s) for bootstrap and, without RDMA, for all "
            "inter-node traffic: the job then runs at management-network speed, or times out where that network "
            "does not connect the nodes."
        ),
        ("Pin NCCL to a data interface: export NCCL_SOCKET_IFNAME==<data interface> (the probe names the best one)."),
    ),
    "ND202": CodeText(
        "socket-ifname-matches-nothing",
        "NCCL_SOCKET_IFNAME matches no interface with an address: the job cannot start.",
        (
            "When NCCL_SOCKET_IFNAME matches no interface with an IP address, bootstrap finds no socket interface"
            " and NCCL init fails on every rank, often only after a rendezvous or init timeout."
        ),
        (
            "Name an existing interface with an address (`ip -br addr`), exactly: export "
            "NCCL_SOCKET_IFNAME==<interface> (the probe names the best one)."
        ),
    ),
    "ND203": CodeText(
        "socket-ifname-down",
        "NCCL_SOCKET_IFNAME matches only (or also) interfaces that are down.",
        (
            "A down interface cannot carry bootstrap traffic: when it is the only match NCCL cannot bootstrap, "
            "and NCCL before 2.28 may pick a down match even when a running one exists."
        ),
        (
            "Bring the interface up, or name only running ones: export NCCL_SOCKET_IFNAME==<running interface> "
            "(the probe names the best one)."
        ),
    ),
    "ND204": CodeText(
        "socket-ifname-ignored",
        "NCCL_SOCKET_IFNAME is ignored or misread (one character, '=^' order, quotes).",
        (
            "NCCL ignores a one-character NCCL_SOCKET_IFNAME and uses its default choice; '=^eth' reads as the "
            "exact name '^eth', not an exclusion; quotes are kept as part of the name. The job then runs on an "
            "interface nobody chose."
        ),
        (
            "Write it as NCCL reads it: '^' before '=' (NCCL_SOCKET_IFNAME=^=docker0), no quotes (in nccl.conf "
            "too), and a whole name: export NCCL_SOCKET_IFNAME==<interface>."
        ),
    ),
    "ND205": CodeText(
        "ifname-prefix-overmatch",
        "A prefix in NCCL_SOCKET_IFNAME/NCCL_IB_HCA also matches longer names (eth1 -> eth10).",
        (
            "NCCL_SOCKET_IFNAME and NCCL_IB_HCA entries are prefixes unless the list starts with '=': eth1 also "
            "selects eth10 and mlx5_1 also mlx5_10, so NCCL may use interfaces or ports meant to be left out."
        ),
        "Make the match exact with a leading '=': export NCCL_SOCKET_IFNAME==eth1, or NCCL_IB_HCA==mlx5_1.",
    ),
    "ND206": CodeText(
        "nccl-on-virtual",
        "NCCL will bootstrap over a virtual or loopback interface other nodes cannot reach.",
        (
            "NCCL's default order leaves out only docker* and lo (and virbr* from 2.28), so a bridge, CNI, tunnel"
            " or VPN interface can become the bootstrap interface; other nodes usually cannot reach it, and "
            "loopback they never can: every multi-node job then fails at init."
        ),
        ("Pin a routable interface: export NCCL_SOCKET_IFNAME==<data interface> (the probe names the best one)."),
    ),
    "ND207": CodeText(
        "rdma-disabled-by-env",
        "Active RDMA ports exist but NCCL_IB_DISABLE/NCCL_NET turns NCCL's IB transport off.",
        (
            "NCCL_IB_DISABLE=1 or NCCL_NET=Socket turns NCCL's IB/RoCE transport off although active ports exist,"
            " so all inter-node traffic goes over TCP sockets at a fraction of the fabric's bandwidth; the value "
            "often comes from an old job script or an nccl.conf file."
        ),
        (
            "unset NCCL_IB_DISABLE / NCCL_NET where only the environment sets them; for a value from nccl.conf, "
            "export NCCL_IB_DISABLE=0 (or NCCL_NET=IB), since the environment wins over the file, or delete its "
            "line there."
        ),
    ),
    "ND208": CodeText(
        "ib-hca-selects-nothing",
        "NCCL_IB_HCA selects none of the active ports: NCCL silently falls back to sockets.",
        (
            "NCCL_IB_HCA filters the ACTIVE ports NCCL may use; when it selects none, NCCL logs 'NET/IB : No "
            "device found.' as INFO, not WARN, and runs all inter-node traffic over TCP sockets."
        ),
        (
            "List the active ports exactly (compare `ibstat`): export NCCL_IB_HCA==<port list the probe prints>, "
            "or change the nccl.conf line that sets it."
        ),
    ),
    "ND209": CodeText(
        "rdma-port-not-active",
        "An RDMA port is not ACTIVE; NCCL skips it (FAIL on a port NCCL would use, WARN on one it does not).",
        (
            "NCCL uses only ACTIVE ports, so a port that is DOWN, INIT or ARMED takes its bandwidth out of the "
            "node: on a GPU node it is a lost rail, and its GPU's traffic crowds another NIC (FAIL, unless "
            "NCCL_IB_HCA excludes it or another port of its HCA is active: a dual-port card's spare, WARN); with no "
            "ACTIVE IB/RoCE port at all NCCL falls back to TCP sockets without a warning."
        ),
        (
            "Check each port with `ibstat` (State Active, Physical state LinkUp), the cable and switch port, and "
            "that a subnet manager answers (`sminfo`; RoCE: the switch port and `ethtool <netdev>`); until it is "
            "fixed, exclude it with NCCL_IB_HCA=^=<hca>:<port>."
        ),
    ),
    "ND210": CodeText(
        "rdma-port-slow",
        "An active RDMA port runs below the rate of its peers on the node (FAIL at a quarter or less on a port NCCL "
        "uses).",
        (
            "A port that trained at a lower rate (a bad cable, transceiver or lane) is used like the others, and "
            "every ring through it runs at its speed, so collectives across nodes slow down; at half rate the rail "
            "runs at ~48% (WARN), at a quarter or less (4X trained as 1X) it is broken (FAIL)."
        ),
        ("Reseat or replace the cable or transceiver; check the lanes and errors with `mlxlink -d <pci>` "
         "(Mellanox/NVIDIA mlx4/mlx5), or `ibv_devinfo -v -d <dev>` and `ibstat <dev>` for other vendors "
         "(Omni-Path hfi1, iWARP i40iw/irdma)."),
    ),
    "ND211": CodeText(
        "roce-gid-unusable",
        "A RoCE port has no usable GID (or NCCL_IB_GID_INDEX points at a wrong one).",
        (
            "RoCE traffic is addressed by GID: without a RoCE v2 GID of the address family NCCL uses (no IP "
            "address on the netdev), or with NCCL_IB_GID_INDEX pointing at another entry, connections between "
            "nodes fail."
        ),
        (
            "Assign an IP address to the RoCE netdev and list the GIDs with `show_gids`; export "
            "NCCL_IB_GID_INDEX=<index of a usable GID> (the probe names one), or unset NCCL_IB_GID_INDEX."
        ),
    ),
    "ND212": CodeText(
        "bond-slave-down",
        "A bond has a down member and runs degraded.",
        (
            "A bond with a down member still passes traffic, but with less bandwidth and no redundancy, so "
            "collectives over it slow down without any error."
        ),
        "Check the members' links: cat /proc/net/bonding/<bond>, the cables and switch ports.",
    ),
    "ND213": CodeText(
        "gpu-nic-numa-mismatch",
        "A GPU's nearest NIC is on another NUMA node.",
        (
            "When a GPU's nearest NIC sits on another NUMA node, GPUDirect RDMA traffic crosses the CPU "
            "interconnect; with the default NCCL_NET_GDR_LEVEL (PXB) NCCL then leaves GDR off for that path, and "
            "inter-node bandwidth drops."
        ),
        (
            "Place NICs and GPUs on the same socket (`nvidia-smi topo -m` shows the paths), or accept the lower "
            "bandwidth."
        ),
    ),
    "ND214": CodeText(
        "gdr-prerequisites-missing",
        "GPUs and RDMA exist but neither a peer-memory module nor DMA-BUF is available.",
        (
            "GPUDirect RDMA needs the nvidia_peermem (or nv_peer_mem) module, or DMA-BUF (open kernel module >= "
            "515 on kernel >= 5.12); without either NCCL stages every inter-node transfer through host memory (no"
            " /GDRDMA), at lower bandwidth."
        ),
        (
            "modprobe nvidia_peermem (check `lsmod | grep nvidia_peermem`), or use the open kernel module >= 515 "
            "on kernel >= 5.12 for DMA-BUF."
        ),
    ),
    "ND215": CodeText(
        "gloo-binds-loopback",
        "With GLOO_SOCKET_IFNAME unset, Gloo will bind loopback (hostname resolves to 127.x).",
        (
            "With GLOO_SOCKET_IFNAME unset Gloo binds the address the hostname resolves to; when that is 127.x, "
            "Gloo groups across nodes (torch's CPU collectives) fail with 'Connection refused, "
            "remote=[127.0.0.1]'. On one node loopback works: `probe` cannot know the job and warns; "
            "`preflight` on one node passes it (saying so) and fails it on two or more nodes."
        ),
        "export GLOO_SOCKET_IFNAME=<inter-node interface> (the probe names the best one).",
        messages={
            # {why}: what the run makes of it (preflight says so, ``preflight/probe.py``); "" from the probe
            DEFAULT_VARIANT: "Gloo will bind loopback ({rule}): multi-node Gloo groups fail with 'Connection "
                             "refused, remote=[127.0.0.1]'{why}",
            # the rule names this host: merged across nodes, it names their hostlist
            "hostname": "Gloo will bind loopback (hostname {host!r} {resolved}): multi-node Gloo groups fail with "
                        "'Connection refused, remote=[127.0.0.1]'{why}",
        },
    ),
    "ND216": CodeText(
        "gloo-ifname-invalid",
        ("GLOO_SOCKET_IFNAME names an interface that is missing, has no address, is down, or is loopback/virtual."),
        (
            "GLOO_SOCKET_IFNAME takes exact names only (no prefixes, no '^') and Gloo uses every listed interface"
            " in turn: a missing name fails with 'Unable to find address for', and a down, loopback or virtual "
            "one makes Gloo pairs across nodes fail or hang."
        ),
        (
            "export GLOO_SOCKET_IFNAME=<interface>, with exact names of routable interfaces only (the probe names"
            " the best one, or the list without the bad entry)."
        ),
    ),
    "ND217": CodeText(
        "env-not-integer",
        "An integer NCCL variable has a non-integer value that NCCL silently reads as a number.",
        (
            "NCCL parses integer variables like strtoll with no error check, so a word reads as 0: "
            "NCCL_IB_DISABLE=true leaves IB enabled and NCCL_P2P_DISABLE=yes does nothing. The setting silently "
            "means something else than written."
        ),
        (
            "Write a number (NCCL_<X>_DISABLE=1 to disable, 0 for the default) or unset the variable; in "
            "nccl.conf put comments on their own line ('#' starts a comment only in column 0)."
        ),
    ),
    "ND218": CodeText(
        "env-value-ignored",
        "An NCCL variable has a value NCCL ignores (unknown level name, out of range).",
        (
            "NCCL ignores a value it does not recognise and keeps its default, without a warning: path levels are"
            " case-sensitive names (PXB, not pxb; nvidia-smi's NODE is PHB), NCCL_DEBUG takes VERSION, WARN, "
            "INFO, TRACE or ABORT, NCCL_CROSS_NIC 0-2, and only NCCL_P2P_DISABLE=1 disables P2P."
        ),
        (
            "Use a value NCCL knows: NCCL_NET_GDR_LEVEL / NCCL_P2P_LEVEL in upper case (e.g. PXB or PHB), "
            "NCCL_DEBUG=INFO, NCCL_CROSS_NIC=0, 1 or 2; or unset the variable."
        ),
    ),
    "ND219": CodeText(
        "env-unknown-name",
        "An NCCL_* name NCCL does not read (typo, deprecated PyTorch name).",
        (
            "NCCL and Gloo ignore names they do not read, so a misspelt name, one NCCL never had (NCCL_TIMEOUT), "
            "a pre-2.2 PyTorch name (NCCL_ASYNC_ERROR_HANDLING, now TORCH_NCCL_ASYNC_ERROR_HANDLING) or 'NAME = "
            "value' with spaces in nccl.conf leaves the intended setting unset."
        ),
        (
            "Rename it to the variable meant (the finding's did-you-mean, or TORCH_<name> for the PyTorch ones) "
            "and unset the wrong name, or fix its line in the conf file; for a collective timeout set "
            "init_process_group(timeout=...) in PyTorch."
        ),
    ),
    "ND220": CodeText(
        "nccl-conf-file",
        (
            "Settings injected by nccl.conf files (NCCL_CONF_FILE, ~/.nccl.conf, /etc/nccl.conf), or an "
            "NCCL_CONF_FILE that does not exist."
        ),
        (
            "NCCL reads NCCL_CONF_FILE (else ~/.nccl.conf) and /etc/nccl.conf at init, below the environment, and"
            " keeps values verbatim: quotes and the carriage return of CRLF line ends become part of the value. "
            "Such settings are easy to forget, and an NCCL_CONF_FILE that does not exist is ignored silently."
        ),
        (
            "Remove quotes from the file's values, convert CRLF files (dos2unix FILE), and point NCCL_CONF_FILE "
            "at an existing file or unset it."
        ),
    ),
    "ND221": CodeText(
        "p2p-or-shm-disabled",
        "NCCL_P2P_DISABLE=1 or NCCL_SHM_DISABLE=1 slows intra-node collectives.",
        (
            "NCCL_P2P_DISABLE=1 turns off NVLink/PCIe peer-to-peer inside the node and NCCL_SHM_DISABLE=1 the "
            "shared-memory transport: GPUs of one node fall back to slower paths, and the intra-node collectives "
            "(FSDP's all-gathers and reduce-scatters) slow down a lot."
        ),
        "unset NCCL_P2P_DISABLE and NCCL_SHM_DISABLE (export them as 0 when an nccl.conf file sets them).",
    ),
    "ND222": CodeText(
        "nccl-net-unavailable",
        "NCCL_NET names a network that is not usable here: NCCL init fails.",
        (
            "NCCL_NET forces one network (IB, Socket or a plugin's name); when that network does not initialise "
            "here NCCL does not fall back: init fails ('Error: network X not found' / 'Failed to initialize any "
            "NET plugin') on every rank."
        ),
        (
            "unset NCCL_NET so NCCL chooses, or set the name meant (IB, Socket, or the installed plugin's name); "
            "for IB, make an RDMA port ACTIVE and check NCCL_IB_DISABLE / NCCL_IB_HCA."
        ),
    ),
    "ND223": CodeText(
        "named-like-ib",
        "An interface named like InfiniBand (ib*) is not IPoIB.",
        (
            "NCCL's default choice prefers interfaces whose name starts with 'ib', so an Ethernet or virtual "
            "interface named ib* can be picked as if it were the InfiniBand (IPoIB) one."
        ),
        "Rename the interface, or set NCCL_SOCKET_IFNAME to the real fabric interface.",
    ),
    "ND224": CodeText(
        "nccl-finds-no-interface",
        "NCCL's default choice finds no running interface with an address.",
        (
            "With NCCL_SOCKET_IFNAME unset NCCL still needs a running interface with an IP address for bootstrap;"
            " with none ('Bootstrap : no socket interface found') every NCCL job fails at init."
        ),
        (
            "Bring up an interface with an IP address (`ip -br addr`) and pin it: export "
            "NCCL_SOCKET_IFNAME==<interface>."
        ),
    ),
    "ND225": CodeText(
        "efa-needs-plugin",
        "EFA devices present: NCCL needs the aws-ofi-nccl plugin to use them.",
        (
            "NCCL's built-in IB transport ignores EFA devices: only the aws-ofi-nccl plugin (libfabric) drives "
            "them, and without it NCCL uses TCP sockets between nodes."
        ),
        "Install aws-ofi-nccl and check with NCCL_DEBUG=INFO that the log says 'Using network Libfabric'.",
    ),
    "ND226": CodeText(
        "no-rdma",
        "No RDMA device: inter-node NCCL traffic will use TCP sockets.",
        (
            "Without InfiniBand, RoCE or EFA, NCCL moves all inter-node data over TCP sockets at a fraction of an"
            " RDMA fabric's bandwidth, so multi-node GPU training is network-bound. On a CPU-only node (PASS) "
            "only Gloo runs, over TCP anyway."
        ),
        (
            "Run multi-node GPU training on nodes with an RDMA fabric; on plain Ethernet prefer HSDP and raise "
            "NCCL_SOCKET_NTHREADS / NCCL_NSOCKS_PERTHREAD."
        ),
    ),
    "ND227": CodeText(
        "file-skipped",
        "A file the probe reads is a FIFO, device or socket, or too large: skipped.",
        (
            "The probe never opens a FIFO, device or socket in the tree it reads (a FIFO would block it "
            "forever) and keeps no file over 1 MiB (a sysfs value, /proc/net table, /etc/hosts or nccl.conf is "
            "far smaller). What that file would have said is missing from the report: a snapshot or --root tree"
            " was made by hand or altered, or the file is not what NCCL expects there."
        ),
        ("Replace the file with the regular file the kernel or NCCL expects there, or take a fresh snapshot "
         "with `nccl-doctor probe --snapshot`."),
    ),
}
