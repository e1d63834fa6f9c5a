"""This node: interfaces from sysfs/procfs, NCCL/Gloo settings as NCCL reads them: the ``probe`` command.

What other packages use is imported from here; the modules behind it are this package's own.
"""

from nccl_doctor.node.checks import check
from nccl_doctor.node.compare import compare, majority_first, node_facts
from nccl_doctor.node.model import NodeProbe
from nccl_doctor.node.probe import probe_node

__all__ = ["NodeProbe", "check", "compare", "majority_first", "node_facts", "probe_node"]
