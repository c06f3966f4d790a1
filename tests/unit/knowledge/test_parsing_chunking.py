"""Extraction of every format and the chunker's rules (deterministic, overlap, headings
as context, a chunk never spans sections)."""

from __future__ import annotations

import itertools

import pytest
from unit.knowledge.builders import text_pdf

from agentloom.knowledge import DocumentInvalid
from agentloom.knowledge.chunking import ChunkSettings, chunk
from agentloom.knowledge.parsing import Extracted, document_format, extract

MD = ("# Guide\n\nIntro.\n\n```\n# not a heading\n```\n\n## Install\n\n"
      + "Run the installer. " * 80 + "\n\n### Linux\n\nUse apt.\n\n## Usage\n\nCall it.\n")


def test_markdown_headings_outside_fences_and_title() -> None:
    doc = extract(MD.encode(), "markdown")
    assert [h.title for h in doc.headings] == ["Guide", "Install", "Linux", "Usage"]
    assert doc.title == "Guide"
    assert all(doc.text[h.offset] == "#" for h in doc.headings)


def test_html_drops_scripts_and_styles_and_keeps_headings() -> None:
    page = (b"<html><head><title>The Page</title><style>p{color:red}</style>"
            b"<script>var secret = 1;</script></head><body><h1>Main</h1><p>Hello "
            b"<b>bold</b> &amp; more</p><script>evil()</script><noscript>x</noscript>"
            b"<h2>Part</h2><p>Body text</p></body></html>")
    doc = extract(page, "html")
    assert "evil" not in doc.text and "secret" not in doc.text and "color" not in doc.text
    assert "Hello bold & more" in doc.text
    assert doc.title == "The Page"
    assert [(h.level, h.title) for h in doc.headings] == [(1, "Main"), (2, "Part")]
    assert doc.text[doc.headings[1].offset:].startswith("Part")


def test_pdf_text_layer() -> None:
    doc = extract(text_pdf(["Refunds take 14 days.", "Ask support."], "Policy"), "pdf")
    assert "Refunds take 14 days." in doc.text and doc.title == "Policy"


@pytest.mark.parametrize(("content", "kind", "code"), [
    (b"\xff\xfe\x00bad", "text", "document_not_utf8"),
    (b"%PDF-1.4 garbage", "pdf", "pdf_unreadable"),
    (b"not a pdf at all", "pdf", "pdf_unreadable"),
])
def test_unreadable_documents_are_refused(content: bytes, kind: str, code: str) -> None:
    with pytest.raises(DocumentInvalid) as err:
        extract(content, kind)
    assert err.value.code == code and err.value.status == 422


def test_format_from_media_type_or_suffix() -> None:
    assert document_format("a.md", None) == "markdown"
    assert document_format("a.bin", "text/html; charset=utf-8") == "html"
    with pytest.raises(DocumentInvalid) as err:
        document_format("a.docx", None)
    assert err.value.code == "media_type_unsupported"
    with pytest.raises(DocumentInvalid):
        document_format("a.txt", "image/png")


def test_chunks_are_deterministic_overlap_and_carry_their_heading_path() -> None:
    doc = extract(MD.encode(), "markdown")
    settings = ChunkSettings(size=300, overlap=60)
    chunks = chunk(doc, settings)
    assert chunks == chunk(extract(MD.encode(), "markdown"), settings)
    assert all(c.text == doc.text[c.start:c.end] and len(c.text) <= 300 for c in chunks)
    install = [c for c in chunks if c.heading == "Guide › Install"]
    assert len(install) > 2
    for a, b in itertools.pairwise(install):
        assert b.start < a.end  # overlap
        assert doc.text[b.start - 1] in " \n"  # starts at a word
    linux = next(c for c in chunks if c.heading.endswith("Linux"))
    assert linux.heading == "Guide › Install › Linux"
    assert linux.embedded_text.startswith("Guide › Install › Linux\n\n")
    usage = next(c for c in chunks if "Call it." in c.text)
    assert usage.heading == "Guide › Usage" and "apt" not in usage.text  # no spanning


def test_a_long_word_is_cut_hard_and_progress_is_made() -> None:
    chunks = chunk(Extracted(text="x" * 5_000), ChunkSettings(size=1_000, overlap=100))
    assert len(chunks) >= 5 and chunks[-1].end == 5_000


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError):
        ChunkSettings(size=100)
    with pytest.raises(ValueError):
        ChunkSettings(size=1_000, overlap=600)
