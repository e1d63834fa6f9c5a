"""Offline diagnosis of NCCL_DEBUG=INFO logs: the ``parse`` command."""
