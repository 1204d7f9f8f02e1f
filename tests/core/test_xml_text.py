"""XML escaping written for the pictures (core/text.py), held to the standard library's
xml.sax.saxutils, which the pictures used before and whose import costs a command's start-up."""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

import pytest

from topodoctor.core.text import xml_escape, xml_quoteattr

CASES = ["a&b<c>d", 'say "hi"', "it's", "both \" and '", "tab\tnl\ncr\r", "", "&amp; already", "GPU0 → NVSwitch"]


@pytest.mark.parametrize("text", CASES)
def test_as_saxutils_writes_it(text: str) -> None:
    assert xml_escape(text) == escape(text)
    assert xml_quoteattr(text) == quoteattr(text)


def test_the_quote_follows_the_value() -> None:
    assert xml_quoteattr('a "b"') == "'a \"b\"'"
    assert xml_quoteattr("a \"b\" 'c'") == "\"a &quot;b&quot; 'c'\""
