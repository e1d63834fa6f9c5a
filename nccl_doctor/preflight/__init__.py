"""Probe, bench and log check on every node of an allocation: the ``preflight`` command."""
