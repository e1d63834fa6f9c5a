"""Collective bandwidth within and across nodes: the ``bench`` command."""
