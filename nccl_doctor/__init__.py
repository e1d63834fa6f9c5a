"""nccl-doctor: find and explain multi-node NCCL/Gloo problems before and after a training job."""

__version__ = "0.1.0"
