"""NCCL's own formats, as ``tools/nccl_catalog.py`` extracts them from its source: ``formats`` (the entries, their
classes and error classes), ``matcher`` (which entry a message came from), ``explain`` (``--explain-unknown``)
and ``warnclass`` (the parse path's matcher of WARN formats, for the WARNs the parser's own rules leave open).
"""
