"""Log findings whose text names the hosts their lines came from, made from their code's templates
(``codes/parse.py``) so that ``preflight`` can merge them by parameters.

In ``preflight`` every node parses its own NCCL log, so a finding there names that node alone: with its host
as the ``Where.host`` its template reads (``{host}``, the ``@host`` variant), node 0 merges the same problem on
many nodes by code and parameters and renders the text once more with their hostlist, instead of finding the
node's name in English. A log of several hosts (``parse`` of a whole job) names them in the text as before,
as free text: nothing merges those. Either way the text is the template's, so ``parse`` output stays the same
to the byte; a templated finding whose text would differ from it (escape sequences cut where a parameter
meets the template's words) is made as free text instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from nccl_doctor.codes import Code
from nccl_doctor.codes.parse import ON_HOST
from nccl_doctor.logs.diagnosis.where import WhereArgs, on_hosts
from nccl_doctor.report import Finding, ParamValue, Severity, finding, templated


def host_finding(code: Code, severity: Severity, variant: str, *, where: WhereArgs, evidence: Iterable[str] = (),
                 fix: str | None = None, **params: ParamValue) -> Finding:
    """``variant``, its text naming ``where``'s host (``{host}``): templated, the parameters it reads only."""
    names = code.text.names(variant)
    used: dict[str, Any] = {k: v for k, v in params.items() if k in names}  # ParamValues, as keywords
    evidence = tuple(evidence)
    free = _free(code, severity, variant, where=where, evidence=evidence, fix=fix, values={**where, **used})
    made = templated(code, severity, variant, fix=fix, evidence=evidence, **where, **used)
    return made if (made.message, made.fix) == (free.message, free.fix) else free


def hosts_finding(code: Code, severity: Severity, variant: str, *, hosts: Iterable[str], where: WhereArgs,
                  evidence: Iterable[str] = (), fix: str | None = None, **params: ParamValue) -> Finding:
    """``variant``, its ``{on}`` naming ``hosts``: the ``@host`` template when they are ``where``'s one host (a
    node's own log), else free text with the hostlist (or nothing, for lines without a host)."""
    on = on_hosts(hosts)
    host = where.get("host")
    if host and on == f" on {host}":
        return host_finding(code, severity, variant + ON_HOST, where=where, evidence=evidence, fix=fix, **params)
    return _free(code, severity, variant, where=where, evidence=tuple(evidence), fix=fix, values={**params, "on": on})


def _free(code: Code, severity: Severity, variant: str, *, where: WhereArgs, evidence: tuple[str, ...],
          fix: str | None, values: dict[str, object]) -> Finding:
    """The free-text finding of ``variant`` rendered with ``values`` (the text ``parse`` always wrote)."""
    message, fixed = code.text.render(variant, {"host": where.get("host"), **values})
    return finding(code, severity, message, fixed if fixed is not None else fix, evidence=evidence, **where)
