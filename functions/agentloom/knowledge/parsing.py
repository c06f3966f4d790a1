"""Document text extraction: plain text, Markdown, HTML and PDF text.

Every format becomes one ``Extracted`` text plus its headings (offset, level, title) so
the chunker can give each chunk its heading path as context. Markdown headings are ATX
(``#`` … ``######``) outside fenced code; HTML goes through the standard library's
``html.parser`` with ``script``/``style``/``template``/``noscript`` content dropped and
``h1``–``h6`` kept as headings; a PDF is read with ``pypdf`` (text layer only: a scanned
image has none, and is refused as empty). The first heading (or the HTML ``<title>``)
is the document title when there is one.
"""

from __future__ import annotations

import io
import logging
import re
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser

from .errors import DocumentInvalid

MEDIA_TYPES = {
    "text/plain": "text", "text/markdown": "markdown", "text/x-markdown": "markdown",
    "text/html": "html", "application/xhtml+xml": "html", "application/pdf": "pdf",
}
SUFFIXES = {".txt": "text", ".text": "text", ".md": "markdown", ".markdown": "markdown",
            ".html": "html", ".htm": "html", ".pdf": "pdf"}
MAX_PDF_PAGES = 2_000
_ATX = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_DROPPED = frozenset({"script", "style", "template", "noscript", "head"})
_BLOCK = frozenset({"p", "div", "section", "article", "li", "ul", "ol", "table", "tr",
                    "br", "pre", "blockquote", "header", "footer", "main", "nav", "aside",
                    "h1", "h2", "h3", "h4", "h5", "h6", "dd", "dt", "figure"})


@dataclass(frozen=True)
class Heading:
    offset: int  # where the heading's line starts in ``Extracted.text``
    level: int
    title: str


@dataclass(frozen=True)
class Extracted:
    text: str
    headings: tuple[Heading, ...] = ()
    title: str = ""
    format: str = "text"
    pages: tuple[int, ...] = field(default=())  # PDF: offset where each page starts


def document_format(name: str, media_type: str | None) -> str:
    """``text`` / ``markdown`` / ``html`` / ``pdf`` from the media type, else the name's
    suffix; anything else is refused."""
    if media_type:
        kind = MEDIA_TYPES.get(media_type.split(";", 1)[0].strip().lower())
        if kind is None:
            raise DocumentInvalid(f"media type {media_type[:100]!r} is not supported; use "
                                  f"one of {', '.join(sorted(MEDIA_TYPES))}",
                                  code="media_type_unsupported", field="media_type")
        return kind
    suffix = name[name.rfind("."):].lower() if "." in name else ""
    kind = SUFFIXES.get(suffix)
    if kind is None:
        raise DocumentInvalid(f"cannot tell the format of {name[:100]!r}; give media_type "
                              f"(one of {', '.join(sorted(MEDIA_TYPES))})",
                              code="media_type_unsupported", field="media_type")
    return kind


def extract(content: bytes, kind: str) -> Extracted:
    if kind == "pdf":
        return _pdf(content)
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise DocumentInvalid("the document is not UTF-8 text", code="document_not_utf8",
                              field="content") from None
    text = _clean(text)
    if kind == "markdown":
        return _markdown(text)
    if kind == "html":
        return _html(text)
    return Extracted(text=text, format="text")


def _clean(text: str) -> str:
    """Newlines normalised, NUL and other C0 controls (but tab/newline) removed."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", "", text)


def _markdown(text: str) -> Extracted:
    headings: list[Heading] = []
    offset, fenced = 0, False
    for line in text.split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and (m := _ATX.match(line)):
            headings.append(Heading(offset, len(m.group(1)), m.group(2).strip()[:200]))
        offset += len(line) + 1
    return Extracted(text=text, headings=tuple(headings), format="markdown",
                     title=headings[0].title if headings else "")


class _HtmlText(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.length = 0
        self.headings: list[Heading] = []
        self.title = ""
        self._skip = 0
        self._in_title = False
        self._heading: tuple[int, int, list[str]] | None = None

    def _emit(self, text: str) -> None:
        self.parts.append(text)
        self.length += len(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _DROPPED:
            self._skip += 1
        if tag == "title":
            self._in_title = True
        if tag in _BLOCK:
            self._emit("\n")
        if len(tag) == 2 and tag[0] == "h" and tag[1] in "123456" and not self._skip:
            self._heading = (self.length, int(tag[1]), [])

    def handle_endtag(self, tag: str) -> None:
        if tag in _DROPPED and self._skip:
            self._skip -= 1
        if tag == "title":
            self._in_title = False
        if self._heading is not None and tag == f"h{self._heading[1]}":
            start, level, words = self._heading
            title = " ".join("".join(words).split())[:200]
            if title:
                self.headings.append(Heading(start, level, title))
            self._heading = None
        if tag in _BLOCK:
            self._emit("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
            return
        if self._skip:
            return
        if self._heading is not None:
            self._heading[2].append(data)
        self._emit(data)


def _html(text: str) -> Extracted:
    parser = _HtmlText()
    parser.feed(text)
    parser.close()
    raw = "".join(parser.parts)
    # collapse runs of blank lines and trailing spaces, keeping heading offsets true
    cleaned, mapping = _squeeze(raw)
    headings = tuple(Heading(mapping(h.offset), h.level, h.title) for h in parser.headings)
    title = " ".join(parser.title.split())[:200] or (headings[0].title if headings else "")
    return Extracted(text=cleaned, headings=headings, title=title, format="html")


def _squeeze(raw: str) -> tuple[str, Callable[[int], int]]:
    out: list[str] = []
    starts: list[tuple[int, int]] = []  # (raw offset, cleaned offset) of each kept line
    raw_offset = cleaned = 0
    blank = True
    for line in raw.split("\n"):
        stripped = " ".join(line.split())
        if stripped:
            starts.append((raw_offset, cleaned))
            out.append(stripped)
            cleaned += len(stripped) + 1
            blank = False
        elif not blank:
            out.append("")
            cleaned += 1
            blank = True
        raw_offset += len(line) + 1

    raw_starts = [raw_at for raw_at, _ in starts]

    def mapping(offset: int) -> int:
        at = bisect_right(raw_starts, offset) - 1
        return starts[at][1] if at >= 0 else 0

    return "\n".join(out).strip("\n"), mapping


def _pdf(content: bytes) -> Extracted:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # its warnings name content
    try:
        reader = PdfReader(io.BytesIO(content))
        if reader.is_encrypted:
            raise DocumentInvalid("the PDF is encrypted; upload an unencrypted copy",
                                  code="pdf_encrypted", field="content")
        if len(reader.pages) > MAX_PDF_PAGES:
            raise DocumentInvalid(f"the PDF has more than {MAX_PDF_PAGES} pages",
                                  code="document_too_large", field="content")
        pages, parts, offset = [], [], 0
        for page in reader.pages:
            text = _clean(page.extract_text() or "").strip()
            pages.append(offset)
            parts.append(text)
            offset += len(text) + 2
        metadata = reader.metadata
        title = str(metadata.get("/Title") or "")[:200] if metadata is not None else ""
    except DocumentInvalid:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError):
        raise DocumentInvalid("the PDF cannot be read", code="pdf_unreadable",
                              field="content") from None
    return Extracted(text="\n\n".join(parts), title=title.strip(), format="pdf",
                     pages=tuple(pages))
