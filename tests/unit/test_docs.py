"""The documents: a short README for every audience, linking to one document per audience
(docs/operations.md, docs/crawling.md, docs/tables.md, docs/emr.md, CONTRIBUTING.md), and no
relative link in them that names a file the repository does not have."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = [README, REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]
AUDIENCE_DOCS = ["docs/operations.md", "docs/crawling.md", "docs/tables.md", "docs/emr.md"]
LINK = re.compile(r"\[[^\]]*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")  # [text](target "title")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def links(doc: Path) -> list[str]:
    """The targets of the markdown links of ``doc``, code blocks left out."""
    return LINK.findall(FENCE.sub("", doc.read_text(encoding="utf-8")))


def test_the_readme_is_at_most_250_lines():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines: move content to docs/"


def test_the_readme_links_to_a_document_per_audience():
    targets = set(links(README))
    for doc in [*AUDIENCE_DOCS, "CONTRIBUTING.md"]:
        assert any(t.split("#", 1)[0] == doc for t in targets), doc
        assert (REPO / doc).is_file(), doc


@pytest.mark.parametrize("doc", AUDIENCE_DOCS + ["CONTRIBUTING.md"])
def test_each_document_links_back_to_the_readme(doc):
    readme = "README.md" if doc == "CONTRIBUTING.md" else "../README.md"
    intro = (REPO / doc).read_text(encoding="utf-8").split("\n\n", 2)[1]  # after the title
    assert f"]({readme})" in intro, doc


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: str(d.relative_to(REPO)))
def test_every_relative_link_names_an_existing_file(doc):
    missing = []
    for target in links(doc):
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
            continue  # http(s), mailto: and anchors within the document
        path = target.split("#", 1)[0]
        if not (doc.parent / path).exists():
            missing.append(target)
    assert missing == [], f"{doc.relative_to(REPO)} links to missing files: {missing}"
