"""This node: interfaces from sysfs/procfs, NCCL/Gloo settings as NCCL reads them: the ``probe`` command."""
