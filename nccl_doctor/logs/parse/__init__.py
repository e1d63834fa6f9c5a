"""The parse half of ``nccl-doctor parse``: NCCL_DEBUG=INFO lines in, a ``ParseResult`` out.

``reader`` turns inputs into lines, ``parser`` routes each line to its handler (``infolines``, ``commlines``,
``state``), ``patterns`` and ``warnsigns`` hold what lines are recognised by, ``model`` the result; ``merge`` and
``parallel`` run ``--jobs N``. Nothing here imports the diagnose half (``logs.diagnosis``): a result says what
NCCL printed, never what is wrong.
"""
