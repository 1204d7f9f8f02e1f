"""Every rule's documentation has the same sections, and the registry refuses one without them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from topodoctor.fleet.codes import CODES as HISTORY
from topodoctor.model import codes
from topodoctor.report.rule_docs import explain_markdown, rules_markdown
from topodoctor.rules import REGISTRY
from topodoctor.rules.registry import Issue, doc_sections, fix_text, rule


def test_every_rule_has_its_sections() -> None:
    for code, r in REGISTRY.items():
        doc = r.sections
        assert doc.title == r.title, code  # the title is one line
        assert doc.why and doc.how, code
        assert "Why it matters:" not in doc.details + doc.how and "How to fix:" not in doc.why, code


def test_sections_are_split_at_their_headings() -> None:
    doc = doc_sections(
        """A title.

        More on what it checks.

        Why it matters: a first paragraph
        on two lines.

        A second paragraph.

        How to fix: do this.
        """
    )
    assert doc.title == "A title."
    assert doc.details == "More on what it checks."
    assert doc.why == "a first paragraph\non two lines.\n\nA second paragraph."
    assert doc.how == "do this."
    assert doc_sections("A title.\n\nWhy it matters:\nbelow its heading.\nHow to fix: x").details == ""


def _body(ctx: object) -> Iterator[Issue]:
    return iter(())


@pytest.mark.parametrize(
    ("doc", "problem"),
    [
        ("A title.\n\nIt matters a lot.\n\nHow to fix: do this.", "no 'Why it matters:' section"),
        ("A title.\n\nWhy it matters: it does.\n\nFix it.", "no 'How to fix:' section"),
        ("A title.\n\nWhy it matters:\n\nHow to fix: do this.", "an empty 'Why it matters:' section"),
        ("A title.\n\nWhy it matters: it does.\n\nHow to fix:   \n", "an empty 'How to fix:' section"),
        ("A title.\n\nHow to fix: do this.\n\nWhy it matters: it does.", "'How to fix:' before"),
        ("A title.\n\nWhy it matters: a.\n\nWhy it matters: b.\n\nHow to fix: c.", "'Why it matters:' twice"),
    ],
)
def test_registry_refuses_a_rule_without_its_sections(doc: str, problem: str) -> None:
    _body.__doc__ = doc
    before = dict(REGISTRY)
    with pytest.raises(ValueError, match=f"rule TD998's documentation has {problem}"):
        rule("TD998", "badly-documented", "warning")(_body)
    assert before == REGISTRY


def test_a_docstring_with_no_text_has_no_title() -> None:
    with pytest.raises(ValueError, match="has no title line"):
        doc_sections("")


@pytest.mark.parametrize("doc", [None, "", "  \n\t "])
def test_registry_refuses_a_rule_with_no_documentation(doc: str | None) -> None:
    _body.__doc__ = doc
    before = dict(REGISTRY)
    with pytest.raises(ValueError, match="rule TD998 has no documentation"):
        rule("TD998", "undocumented", "warning")(_body)
    assert before == REGISTRY


def test_registry_refuses_a_name_another_rule_has() -> None:
    _body.__doc__ = "A title.\n\nWhy it matters: it does.\n\nHow to fix: do this."
    before = dict(REGISTRY)
    with pytest.raises(ValueError, match="rule name 'bw-slow-link' registered twice"):
        rule("TD998", "bw-slow-link", "warning")(_body)
    assert before == REGISTRY


def test_the_details_start_on_the_line_after_the_title() -> None:
    doc = doc_sections("A title.\nIts details.\n\nWhy it matters: a.\n\nHow to fix: b.")
    assert (doc.title, doc.details) == ("A title.", "Its details.")


def test_a_rule_s_title_is_its_first_line_of_text() -> None:
    _body.__doc__ = "\n    A title.\n\n    Why it matters: it does.\n\n    How to fix: do this.\n    "
    try:
        rule("TD998", "docstring-on-its-own-line", "warning")(_body)
        assert REGISTRY["TD998"].title == "A title."
    finally:
        REGISTRY.pop("TD998", None)
        codes.unregister("TD998")  # its row in the one table of codes too


def test_registry_takes_a_rule_with_its_sections() -> None:
    _body.__doc__ = "A title.\n\nWhy it matters: it does.\n\nHow to fix: do this."
    try:
        rule("TD998", "well-documented", "warning")(_body)
        assert REGISTRY["TD998"].sections.how == "do this."
        assert REGISTRY["TD998"].fix == "Do this."  # written once: the findings carry the section
    finally:
        REGISTRY.pop("TD998", None)
        codes.unregister("TD998")  # its row in the one table of codes too


def test_explain_and_the_rules_page_show_the_sections() -> None:
    text = explain_markdown("nvlink-down")
    doc = REGISTRY["TD101"].sections
    assert f"**{doc.title}**" in text
    assert "\n**Why it matters:** " + doc.why.split("\n")[0] in text
    assert "\n**How to fix:** " + doc.how.split("\n")[0] in text
    assert text.index("Why it matters") < text.index("How to fix") < text.index("- severity:")
    page = rules_markdown()
    # every code has its fix; the rules and the history's codes say why too
    assert page.count("**How to fix:**") == len(codes.TABLE)
    assert page.count("**Why it matters:**") == len(REGISTRY) + len(HISTORY)


def test_a_finding_carries_its_rules_how_to_fix_section_as_its_fix() -> None:
    """The fix is written once, in the docstring: every rule's fix hint is its section on one line."""
    for code, r in REGISTRY.items():
        how = " ".join(r.sections.how.split())
        assert r.fix == how[:1].upper() + how[1:], code
    assert fix_text("reseat the\n    card;  then re-run.") == "Reseat the card; then re-run."
