"""libfabric providers, as aws-ofi-nccl names them (``NET/OFI Selected Provider is %s``): which fabric each
drives, and which ones carry the traffic over TCP.

A provider name may be layered, ``tcp;ofi_rxm`` or ``verbs;ofi_rxm``: the first part is the core provider,
the one that moves the bytes; the utility layers after it (``ofi_rxm``, ``ofi_rxd``) add reliable
messaging on top. Only a TCP core is a fallback: HPE Slingshot's ``cxi`` (NERSC, ALCF, OLCF-style
systems), verbs, PSM3 and Omni-Path Express are RDMA fabrics of their own, as EFA is.
"""

from __future__ import annotations

from collections.abc import Iterable

TCP_PROVIDERS = frozenset({"tcp", "sockets", "udp"})  # libfabric's providers over the host's IP stack
# core provider -> the fabric it drives, as the report names it
RDMA_FABRICS = {
    "efa": "EFA",
    "cxi": "HPE Slingshot (cxi)",
    "verbs": "InfiniBand/RoCE verbs",
    "psm3": "RoCE/Ethernet PSM3",
    "psm2": "Omni-Path PSM2",
    "opx": "Omni-Path Express (opx)",
}


def core(provider: str) -> str:
    """``tcp;ofi_rxm`` -> ``tcp``: the provider that moves the bytes."""
    return provider.split(";", 1)[0].strip().lower()


def fabric(provider: str) -> str | None:
    """The RDMA fabric a provider drives (``efa-direct`` is EFA too), None for TCP or one not known."""
    c = core(provider)
    return RDMA_FABRICS.get(c) or (RDMA_FABRICS["efa"] if c.startswith("efa") else None)


def over_tcp(providers: Iterable[str]) -> bool:
    """Every provider seen runs over TCP (at least one seen): the ND116 fallback. A provider this table
    does not know is never called TCP: a false FAIL on a healthy fabric costs more than a missed one."""
    cores = [core(p) for p in providers]
    return bool(cores) and all(c in TCP_PROVIDERS for c in cores)


def is_rdma(provider: str) -> bool:
    return fabric(provider) is not None


def label(providers: Iterable[str]) -> str:
    """What the report calls the inter-node fabric: ``EFA/libfabric (aws-ofi-nccl)`` for efa (as before),
    ``HPE Slingshot (cxi)/libfabric (aws-ofi-nccl)``, or the provider's own name when it is not known."""
    names = sorted({fabric(p) or f"libfabric {core(p)}" for p in providers if core(p)}) or [RDMA_FABRICS["efa"]]
    named = " + ".join(names)
    return f"{named} (aws-ofi-nccl)" if named.startswith("libfabric ") else f"{named}/libfabric (aws-ofi-nccl)"
