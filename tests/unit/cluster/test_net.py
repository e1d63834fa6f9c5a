"""The endpoint's syntax, host resolution, and the route (address, interface) to the rendezvous host."""

import re

import pytest

from nccl_doctor.cluster import net
from nccl_doctor.errors import InputError


def test_route_to_loopback_is_local():
    r = net.route_to("127.0.0.1", 29500)
    assert r.loopback and r.is_local and r.local_ip == "127.0.0.1" and r.iface == "lo"
    with pytest.raises(InputError, match="cannot resolve"):
        net.route_to("no-such-host.invalid", 1)


@pytest.mark.parametrize("text,msg", [
    ("host:99999", "port 99999 is not a TCP port (1-65535)"), ("host:0", "port 0 is not a TCP port"),
    ("nohostport", "is not HOST:PORT"), (":abc", "is not HOST:PORT"), (":29500", "is not HOST:PORT"),
    ("host:", "is not HOST:PORT")])
def test_rdzv_endpoint_syntax_and_port_range(text, msg):
    with pytest.raises(InputError, match=re.escape(msg)):
        net.parse_endpoint(text)


def test_rdzv_endpoint_parses_and_resolves():
    assert net.parse_endpoint("n1:29500") == ("n1", 29500)
    assert net.parse_endpoint("[::1]:29500") == ("::1", 29500)
    net.resolve("127.0.0.1", "--rdzv-endpoint")
    with pytest.raises(InputError, match=re.escape("--rdzv-endpoint: cannot resolve host 'no-such-host.invalid'")):
        net.resolve("no-such-host.invalid", "--rdzv-endpoint")


def test_gloo_iface_to_is_the_routed_interface_never_loopback(fake_route):
    assert net.gloo_iface_to("n1", 1, route=fake_route(local=False)) == "eth1"
    assert net.gloo_iface_to("127.0.0.1", 1, route=fake_route(local=True, loop=True)) is None
    assert net.gloo_iface_to("127.0.0.1", 29500) is None  # the real route: lo
    assert net.gloo_iface_to("no-such-host.invalid", 1) is None  # best effort: Gloo falls back to the hostname


def test_port_origins_are_the_words_of_the_busy_port_error():
    assert [o.value for o in net.PortOrigin] == ["--rdzv-endpoint", "MASTER_PORT", "29500 + job id % 1000",
                                                 "a free port"]
    assert net.rdzv_port_origin("n1:1", {}, 2) == "--rdzv-endpoint"
    assert net.rdzv_port_origin(None, {"MASTER_PORT": "31000"}, 2) == "MASTER_PORT"
    assert net.rdzv_port_origin(None, {}, 1) == "a free port"
