"""``printable``: every escape sequence and control character goes (tab and newline stay), the visible text
stays, and what XML 1.0 forbids becomes U+FFFD."""

import re

import pytest

from nccl_doctor.text import REPLACEMENT, printable, printable_data

BAD = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


@pytest.mark.parametrize(("raw", "shown"), [
    ("nul\x00ctl\x01 bell\x07 bs\x08 del\x7f", "nulctl bell bs del"),
    ("a\x1b]52;c;ZXZpbA==\x07b", "ab"),  # OSC 52: writes the clipboard; BEL-terminated
    ("a\x1b]2;owned\x1b\\b", "ab"),  # OSC 2: the window title; ST-terminated
    ("a\x1b]8;;http://evil\x9cb", "ab"),  # OSC 8 hyperlink, 8-bit ST
    ("a\x1bPq#0;2;0;0;0#0~~\x1b\\b", "ab"),  # DCS (sixel), up to ST
    ("a\x1bX sos \x1b\\b\x1b^pm\x1b\\c\x1b_apc\x1b\\d", "abcd"),  # SOS, PM, APC
    ("a\x1b[31;1mred\x1b[0m b", "ared b"),  # CSI (7-bit)
    ("a\u009b31mred\u009b0m", "ared"),  # CSI (8-bit, C1)
    ("a\u009d0;title\u009cb", "ab"),  # OSC (8-bit)
    ("a\u0090dcs\u009cb", "ab"),  # DCS (8-bit)
    ("a\x1bcb\x1b(Bc\x1b", "abc"),  # RIS (reset the terminal), a charset designation, a lone ESC at the end
    ("a\x1b]52;c;unterminated", "a"),  # cut short: removed to the end
    ("a\x1b[31", "a"),
    ("tab\tand\nnewline stay", "tab\tand\nnewline stay"),
    ("carriage\rreturn", "carriagereturn"),
    ("lone \udcff surrogate \ufffe \uffff", f"lone {REPLACEMENT} surrogate {REPLACEMENT} {REPLACEMENT}"),
    ("émoji 🚀 and ü stay", "émoji 🚀 and ü stay"),
])
def test_printable(raw, shown):
    out = printable(raw)
    assert out == shown
    assert not BAD.search(out)


def test_clean_text_is_returned_as_is():
    text = "hosta:100:100 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC"
    assert printable(text) is text
    data = {"hosts": ["a", "b"], "n": 3, "nested": ({"k": "v"},)}
    assert printable_data(data) is data


def test_printable_data_cleans_keys_values_and_nesting():
    data = {"ho\x1b]2;t\x07st": ["a\x00", ("b\x9b1m",), 5, None, {"k": "v\x1bPx\x1b\\"}]}
    assert printable_data(data) == {"host": ["a", ("b",), 5, None, {"k": "v"}]}
