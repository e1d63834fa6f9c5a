"""From measured bandwidth to the FSDP/HSDP mesh to train with: the ``plan`` command.

It reads figures (the command line, or a bench/preflight JSON) and computes; it never imports torch.
What other packages use is imported from here.
"""

from nccl_doctor.plan.inputs import parse_params, run_failed
from nccl_doctor.plan.oneline import plan_line

__all__ = ["parse_params", "plan_line", "run_failed"]
