"""The parse half of ``nccl-doctor parse``: NCCL_DEBUG=INFO lines in, a ``ParseResult`` out.

``api`` holds ``parse_lines``/``parse_paths``, ``reader`` turns inputs into lines, ``parser`` routes each line to
its handler (``infolines``, ``commlines``, ``state``: functions over a ``ParserState``), ``patterns`` and
``warnsigns`` hold what lines are recognised by, ``model`` the result; ``merge`` and ``parallel`` run
``--jobs N``. Nothing here imports the diagnose half (``logs.diagnosis``, lint-imports checks it): a result
says what NCCL printed, never what is wrong.
"""
