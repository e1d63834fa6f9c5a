"""The diagnose half of ``nccl-doctor parse``: a ``ParseResult`` in, a ``Report`` of findings out.

``diagnose`` orders the findings, ``transports`` infers the inter- and intra-node transports, ``errorfindings``
turns grouped errors into findings with the fix their text selects (``logs.errorrules``), ``where`` says where a
finding was seen, ``limits`` reports what the parser only counted. The report's payload is ``logs.view``.
"""
