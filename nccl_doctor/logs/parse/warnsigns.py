"""What NCCL's error paths say about the transport and about how fatal they are, beyond the channel lines.

Each rule comes from a format string of NCCL's source (tags in ``fixtures/logs/SOURCES.md``):

* transport hints: the source file an error trace or a WARN prefix names (``transport/net_ib.cc``,
  ``transport/net_ib/connect.cc`` from 2.27, ``transport/net_socket.cc``), the IB data-path and async
  events (``NET/IB : Got completion from peer``, ``Got async event``, ``IBV_EVENT_*``, QP errors) and the
  socket transport's own messages (``NET/Socket``, ``socketFinalizeAccept``);
* fatal messages the generic WARN rules miss: ``socketFinalizeAccept: wrong type`` (misc/socket.cc
  2.12+) and the last retry of a connect (``connect to X returned E, retrying (N/N)``, misc/socket.cc
  2.27+: the next attempt fails for good);
* messages NCCL recovers from: the proxy service failing an operation of a communicator being torn
  down (``Failed to execute operation Close``, proxy.cc 2.12+) and the CollNet/SHARP set-up that NCCL
  abandons for the point-to-point network (``Cannot initialize CollNet, using point-to-point network
  instead``, transport.cc 2.12+; ``CollNet is not supported or fails to initialize, ignoring``,
  graph/tuning.cc).
"""

from __future__ import annotations

import re

from nccl_doctor.logs.catalog.formats import Cls
from nccl_doctor.logs.catalog.warnclass import warn_class

IB_HINT = "IB"
SOCKET_HINT = "Socket"

# (transport family, pattern) over a WARN/error text, its WARN prefix (``file.cc:NN``) or a trace line
_HINTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (IB_HINT, re.compile(
        r"\bnet_ib(?:\.cc|/)|NET/IB ?: ?.*(?:Got completion|async|\bQP\b)|IBV_EVENT_\w+"
        r"|\bibv_(?:modify_qp|create_qp|post_send|post_recv|poll_cq|reg_mr)\b")),
    (SOCKET_HINT, re.compile(r"\bnet_socket\.cc\b|NET/Socket ?:(?! ?no interface)|\bsocketFinalizeAccept\b")),
)
# c10's CUDA_CHECK message as PyTorch's ProcessGroupNCCL watchdog rethrows it (c10/cuda/CUDAException.cpp)
TORCH_CUDA_ERROR_RE = re.compile(r"\bCUDA error: [^\\\n]+?(?=\\n|\s*$|\. CUDA kernel errors)")
# CUDA's error text where no NCCL prefix carries it: NCCL's own ``Cuda failure '%s'`` cut from its prefix,
# nccl-tests' ``%s: Test CUDA failure %s:%d '%s'`` (src/common.h CUDACHECK; ``Cuda failure %s:%d '%s'`` in
# old releases), printed by the program, not NCCL
BARE_CUDA_FAILURE_RE = re.compile(r"\b(?:Cuda|CUDA) failure (?:[\w./-]+:\d+ )?'[^']+'")
BARE_CUDA_WORDS = ("Cuda failure", "CUDA failure", "CUDA error: ")  # the cheap test before the regex
_FINALIZE_WRONG_TYPE_RE = re.compile(r"socketFinalizeAccept: wrong type")
_LAST_RETRY_RE = re.compile(r"connect to \S+ returned (.+?), retrying \((\d+)/(\d+)\)")
_TEARDOWN_OP_RE = re.compile(
    r"(?:Failed to execute operation|Error encountered progressing operation=)\s*"
    r"(?:Close|Stop|Abort|Deregister|DeregMr)\b")
_COLLNET_DATA_PATH_RE = re.compile(r"sizes|returned invalid|pattern")  # CollNet errors of a running job
_ASYNC_FATAL_RE = re.compile(r"\basync fatal event\b")
_COLLNET_RE = re.compile(r"\bCollNet\b|\bcoll_net\b|\bSHARP\b|\bsharp_", re.I)
_COLLNET_FALLBACK_RE = re.compile(
    r"Cannot initialize CollNet, using point-to-point|CollNet is not supported or fails to initialize, ignoring"
    r"|disabling CollNet")


def transport_hint(text: str) -> str | None:
    """The transport family an error text (or its source file) shows, if any."""
    for family, rx in _HINTS:
        if rx.search(text):
            return family
    return None


def fatal_beyond_rules(msg: str) -> bool:
    """A fatal NCCL message that the generic WARN rules do not catch (see the module docstring)."""
    if _FINALIZE_WRONG_TYPE_RE.search(msg) or "exceeded error retry count" in msg:  # socketTryAccept 2.27+
        return True
    m = _LAST_RETRY_RE.search(msg)
    return m is not None and int(m.group(2)) >= int(m.group(3))


def retry_line(msg: str) -> bool:
    """An INFO ``connect to X returned E, retrying (N/M)`` line (2.27+)."""
    return _LAST_RETRY_RE.search(msg) is not None


def teardown(msg: str) -> bool:
    """The proxy service failing an operation that only a communicator being destroyed or aborted sends
    (``Close``, ``Stop``, ``Abort``, ``Deregister``): a consequence of the teardown, never a cause."""
    return _TEARDOWN_OP_RE.search(msg) is not None


def collnet_setup(msg: str) -> bool:
    """A WARN of the CollNet/SHARP set-up, which NCCL abandons for the point-to-point network; a CollNet
    data-path error (``CollNet sizes: want=.. got=..``, ``Unknown collnet pattern``) is not one."""
    return _COLLNET_RE.search(msg) is not None and _COLLNET_DATA_PATH_RE.search(msg) is None


def async_fatal(msg: str) -> bool:
    """``NET/IB : mlx5_0:1 async fatal event ...`` (net_ib/common.cc 2.28+): the device, CQ or QP is dead."""
    return _ASYNC_FATAL_RE.search(msg) is not None


def collnet_fallback(msg: str) -> bool:
    """NCCL gave CollNet up and uses the point-to-point network: errors before it were recovered from."""
    return _COLLNET_FALLBACK_RE.search(msg) is not None


def catalog_fatal(msg: str) -> bool:
    """A WARN whose catalogued format NCCL's source follows with an error return (``error-fatal`` in
    data/nccl-catalog.json.gz); read only for WARNs the parser's own rules do not decide."""
    return warn_class(msg) == Cls.FATAL
