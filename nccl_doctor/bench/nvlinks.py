"""Each GPU's NVLinks, up or not, as NVML reports them (``nvidia-ml-py``'s ``pynvml``; the optional extra
``nccl-doctor[gpu]``). No torch. Imported only where the GPU-pair pass runs (GPU nodes); ``pynvml`` is
imported inside ``read_nvlinks``, in a try, so a CPU user never needs it and a node without it is a line in
the report (``BenchResult.nvlinks_unread``), not a failure.

``read_nvlinks`` takes the NVML module as a parameter (a fake in the tests): for each device, its PCI bus id
and ``nvmlDeviceGetNvLinkState`` for links 0 .. ``NVML_NVLINK_MAX_LINKS - 1``; a link NVML does not support on
that GPU (PCIe cards, fewer links) raises and is not counted.
"""

from __future__ import annotations

from typing import Any

NVML_FEATURE_ENABLED = 1  # nvmlEnableState_t: the link is up
MAX_LINKS_FALLBACK = 18  # NVML_NVLINK_MAX_LINKS where the binding lacks the constant (NVLink 4/5: 18 per GPU)
PCI_ID_FIELD = "busId"  # nvmlPciInfo_t: "00000000:1B:00.0" (an 8-digit domain)
SYSFS_DOMAIN_DIGITS = 4


def load_nvml() -> tuple[Any, str | None]:
    """(the ``pynvml`` module, None) or (None, why not): only GPU nodes get here, and only they need it."""
    try:
        import pynvml  # nvidia-ml-py: optional, `pip install 'nccl-doctor[gpu]'`
    except ImportError as exc:
        return None, f"nvidia-ml-py is not installed ({exc}; pip install 'nccl-doctor[gpu]')"
    return pynvml, None


def sysfs_address(bus_id: str | bytes) -> str:
    """NVML's ``00000000:1B:00.0`` as sysfs names it (``0000:1b:00.0``)."""
    text = bus_id.decode() if isinstance(bus_id, bytes) else bus_id
    domain, _, rest = text.strip().lower().partition(":")
    return f"{domain[-SYSFS_DOMAIN_DIGITS:]:0>{SYSFS_DOMAIN_DIGITS}}:{rest}"


def read_nvlinks(nvml: Any) -> tuple[list[tuple[str, int, int]], str | None]:
    """[(GPU PCI address, links up, links it has)] for every GPU NVML sees, or ([], why) when NVML cannot
    start (no driver, no permission). GPUs with no NVLink (PCIe cards) are left out."""
    try:
        nvml.nvmlInit()
    except Exception as exc:
        return [], f"NVML did not start ({exc})"
    try:
        most = int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", MAX_LINKS_FALLBACK))
        out = []
        for i in range(int(nvml.nvmlDeviceGetCount())):
            handle = nvml.nvmlDeviceGetHandleByIndex(i)
            up = links = 0
            for link in range(most):
                try:
                    state = nvml.nvmlDeviceGetNvLinkState(handle, link)
                except Exception:  # NVMLError_NotSupported / InvalidArgument: no such link on this GPU
                    continue
                links += 1
                up += int(state == NVML_FEATURE_ENABLED)
            if links:
                out.append((sysfs_address(getattr(nvml.nvmlDeviceGetPciInfo(handle), PCI_ID_FIELD)), up, links))
        return out, None
    except Exception as exc:
        return [], f"NVML failed reading the GPUs ({exc})"
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:
            pass  # shutting NVML down cannot change what was read
