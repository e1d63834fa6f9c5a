"""Findings made from parameters: the message is the code's template rendered with ``where`` and the params,
the params travel between nodes (``to_wire``), and the user's JSON report keeps its keys."""

import json

import pytest

from nccl_doctor.codes import Code
from nccl_doctor.preflight import checked
from nccl_doctor.report import Finding, Severity, Where, templated

LOOPBACK = "Gloo will bind loopback (hostname 'n1' -> 127.0.1.1 (/etc/hosts)): multi-node Gloo groups fail with " \
           "'Connection refused, remote=[127.0.0.1]'"
REPORT_KEYS = ["code", "name", "severity", "message", "fix", "where", "evidence"]


def _loopback(host: str = "n1") -> Finding:
    return templated(Code.GLOO_BINDS_LOOPBACK, Severity.WARN, "hostname", fix="export GLOO_SOCKET_IFNAME=ens5",
                     host=host, iface="lo", resolved="-> 127.0.1.1 (/etc/hosts)", why="")


def test_templated_renders_the_codes_template_with_where_and_params():
    f = _loopback()
    assert f.message == LOOPBACK
    assert f.fix == "export GLOO_SOCKET_IFNAME=ens5"
    assert (f.template, f.param("resolved"), f.param("why")) == ("hostname", "-> 127.0.1.1 (/etc/hosts)", "")
    assert f.where == Where(host="n1", iface="lo")
    assert f.template_names() == {"host", "resolved", "why"}


def test_a_missing_value_or_variant_fails_where_the_check_is_written():
    with pytest.raises(KeyError):
        templated(Code.GLOO_BINDS_LOOPBACK, Severity.WARN, "hostname", host="n1")
    with pytest.raises(KeyError):
        templated(Code.GLOO_BINDS_LOOPBACK, Severity.WARN, "no-such-variant", rule="r", why="")


def test_a_param_named_like_a_where_field_is_refused():
    with pytest.raises(ValueError, match="'host' is a Where field"):
        Finding(code=Code.GLOO_BINDS_LOOPBACK, severity=Severity.WARN, message="m", params=(("host", "n1"),))


def test_rerendered_names_the_new_where_and_values():
    f = _loopback().rerendered(where=Where(host="n[1-3]", iface="lo"), severity=Severity.FAIL, why=" (3 nodes)")
    assert f.message == LOOPBACK.replace("'n1'", "'n[1-3]'") + " (3 nodes)"
    assert f.severity is Severity.FAIL
    free = Finding(code=Code.NCCL_WARNING, severity=Severity.WARN, message="on n1")
    assert free.rerendered(where=Where(host="n[1-3]")).message == "on n1"  # free text is never edited


def test_params_travel_between_nodes_but_not_into_the_report_json():
    """``to_wire`` adds template and params; ``as_dict`` (the user's report) keeps exactly its keys."""
    f = _loopback()
    assert list(f.as_dict()) == REPORT_KEYS
    wire = json.loads(json.dumps(f.to_wire()))
    assert wire["template"] == "hostname" and wire["params"]["resolved"] == "-> 127.0.1.1 (/etc/hosts)"
    assert Finding.from_dict(checked.finding_dict(wire)) == f
    assert Finding.from_dict(f.as_dict()).template is None  # the report form is free text
    bare = Finding(code=Code.NCCL_WARNING, severity=Severity.WARN, message="m")
    assert bare.to_wire() == bare.as_dict()


@pytest.mark.parametrize(("params", "why"), [
    ({"x": [1]}, "must be a string, a number or null"),
    ({"x": True}, "must be a string, a number or null"),
    ({"rank": 1}, "no Where field"),
])
def test_a_peers_params_are_checked(params, why):
    wire = {**_loopback().to_wire(), "params": params}
    with pytest.raises(ValueError, match=why):
        checked.finding_dict(wire)
