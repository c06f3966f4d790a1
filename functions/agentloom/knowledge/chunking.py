"""Deterministic chunking with overlap; headings kept as context.

The text is cut into sections at its headings (a chunk never spans two sections), and
each section into windows of at most ``size`` characters that end at the best break
found in the window's second half — a blank line, then a line end, then a sentence end,
then a space, else a hard cut — and overlap the previous window by about ``overlap``
characters (moved forward to a word start). Each chunk carries its heading path
(``Guide › Install › Linux``), which is also prefixed to the text that is embedded, so a
passage keeps the context its heading gives. The same text and settings always give the
same chunks, and a chunk's ``key`` is the hash of what is embedded: an unchanged chunk
of a changed document keeps its key and is not embedded again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from .parsing import Extracted, Heading

BREAKS = ("\n\n", "\n", ". ", "? ", "! ", "; ", " ")
SEPARATOR = " › "


@dataclass(frozen=True)
class Chunk:
    ordinal: int
    start: int  # offsets into the extracted text, end exclusive
    end: int
    heading: str
    text: str

    @property
    def embedded_text(self) -> str:
        return f"{self.heading}\n\n{self.text}" if self.heading else self.text

    @property
    def key(self) -> str:
        return hashlib.sha256(self.embedded_text.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class ChunkSettings:
    size: int = 1_000
    overlap: int = 150

    def __post_init__(self) -> None:
        if not 200 <= self.size <= 8_000:
            raise ValueError("chunk size must be 200..8000 characters")
        if not 0 <= self.overlap <= self.size // 2:
            raise ValueError("chunk overlap must be 0..size/2 characters")


def chunk(doc: Extracted, settings: ChunkSettings) -> list[Chunk]:
    chunks: list[Chunk] = []
    for start, end, heading in _sections(doc.text, doc.headings):
        for a, b in _windows(doc.text, start, end, settings):
            chunks.append(Chunk(len(chunks), a, b, heading, doc.text[a:b]))
    return chunks


def _sections(text: str, headings: Sequence[Heading]) -> Iterator[tuple[int, int, str]]:
    path: list[Heading] = []
    bounds = [h.offset for h in headings] + [len(text)]
    if not headings or headings[0].offset > 0:
        yield 0, bounds[0], ""
    for i, heading in enumerate(headings):
        path = [h for h in path if h.level < heading.level] + [heading]
        yield heading.offset, bounds[i + 1], SEPARATOR.join(h.title for h in path)


def _windows(text: str, start: int, end: int,
             settings: ChunkSettings) -> Iterator[tuple[int, int]]:
    pos = _skip_space(text, start, end)
    while pos < end:
        limit = pos + settings.size
        cut = end if limit >= end else _break(text, pos, limit)
        a, b = pos, cut
        while b > a and text[b - 1].isspace():
            b -= 1
        if b > a:
            yield a, b
        if cut >= end:
            return
        nxt = max(cut - settings.overlap, pos + 1)
        if nxt < cut:  # start the overlap at a word
            space = text.find(" ", nxt, cut)
            nxt = space + 1 if space != -1 else cut
        pos = _skip_space(text, nxt, end)


def _break(text: str, pos: int, limit: int) -> int:
    floor = pos + (limit - pos) // 2
    for mark in BREAKS:
        at = text.rfind(mark, floor, limit)
        if at != -1:
            return at + len(mark)
    return limit


def _skip_space(text: str, pos: int, end: int) -> int:
    while pos < end and text[pos].isspace():
        pos += 1
    return pos
