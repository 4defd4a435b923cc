"""Fit a rich table to the console width without ever splitting a name or a number.

Rich shrinks a too-wide table by folding cells mid-word ("vr-nvl / 72", "72, / 960"). Here every
column is one of two kinds:
- a *kept* column (identifiers marked `no_wrap`, and right-justified number columns): its cells are
  never wrapped, so the column is as wide as its widest cell;
- a *text* column (titles, notes): its cells wrap at spaces only, so it is at least as wide as its
  longest word.
Headers are words for people and wrap at spaces too. When even those minimum widths do not fit, the
table is printed one record per block ("header  value" lines), which fits any width and loses nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.table import Column, Table

_WORD = re.compile(r"\S+")
BLOCK_GAP = 2  # spaces between a block's labels and its values


def _plain(console: Console, cell: Any) -> str | None:
    """A cell's text as printed, or None for a renderable that is not text (left to rich)."""
    from rich.text import Text

    if isinstance(cell, str):
        return console.render_str(cell).plain
    if isinstance(cell, Text):
        return cell.plain
    return None


@dataclass
class _Fit:
    """One column's widths: `least` without splitting a word (or a kept cell), `most` unwrapped."""

    column: Column
    kept: bool
    least: int
    most: int
    pad: int


def _longest(texts: list[str], whole_lines: bool) -> int:
    if whole_lines:
        return max((len(line) for t in texts for line in t.split("\n")), default=0)
    return max((len(w) for t in texts for w in _WORD.findall(t)), default=0)


def _measure(console: Console, t: Table, index: int, col: Column) -> _Fit | None:
    cells = [_plain(console, c) for c in col._cells]
    header = _plain(console, col.header) if t.show_header else ""
    if header is None or any(c is None for c in cells):
        return None
    texts = [c for c in cells if c is not None]
    kept = bool(col.no_wrap) or col.justify == "right"
    least = max(_longest(texts, whole_lines=kept), _longest([header], whole_lines=False), 1)
    most = max(_longest([*texts, header], whole_lines=True), 1)
    return _Fit(col, kept, least, most, t._get_padding_width(index))


def _apply(console: Console, t: Table, fits: list[_Fit], width: int) -> None:
    """Give every column an explicit width between its least and most: the room above the least
    shared in proportion to what each column would use, kept columns never wrapped."""
    from rich.text import Text

    room = width - t._extra_width - sum(f.pad + f.least for f in fits)
    want = [f.most - f.least for f in fits]
    total = sum(want)
    extra = [min(w, room * w // total) if total else 0 for w in want]
    left = room - sum(extra)
    for i in sorted(range(len(fits)), key=lambda i: -want[i]):  # the remainder, one space at a time
        if left <= 0:
            break
        if extra[i] < want[i]:
            extra[i] += 1
            left -= 1
    for f, e in zip(fits, extra, strict=True):
        f.column.width = f.least + e
        f.column.no_wrap = f.kept
        f.column.overflow = "ellipsis" if f.kept else "fold"  # neither happens: the width holds every word
        if t.show_header:
            header = f.column.header
            text = header.copy() if isinstance(header, Text) else console.render_str(str(header))
            text.no_wrap, text.overflow = False, "fold"  # a header wraps at its spaces
            f.column.header = text


def _needed(t: Table, fits: list[_Fit], attr: str) -> int:
    return t._extra_width + sum(f.pad + getattr(f, attr) for f in fits)


def blocks(console: Console, t: Table, width: int) -> RenderableType:
    """The table as one block per record: one "header  value" line per column, the first (the
    record's name) in bold; values wrap at spaces. Fits any width."""
    from rich.console import Group
    from rich.table import Table as RichTable
    from rich.text import Text

    parts: list[Any] = []
    if t.title:
        parts.append(Text(_plain(console, t.title) or str(t.title), style="bold"))
    headers = [(_plain(console, c.header) or "").replace("\n", " ") for c in t.columns]
    labels = headers if t.show_header else [(_plain(console, c) or "") for c in t.columns[0]._cells]
    label_w = min(max((len(h) for h in labels), default=0), max(width // 3, 8))
    for r in range(t.row_count):
        cells = [(_plain(console, c._cells[r]) or "") if r < len(c._cells) else "" for c in t.columns]
        grid = RichTable.grid(padding=(0, BLOCK_GAP))
        grid.add_column(width=label_w, style="dim", overflow="fold")
        grid.add_column(overflow="fold")
        if t.show_header:
            grid.add_row(headers[0], Text(cells[0], style="bold"))
            for h, v in zip(headers[1:], cells[1:], strict=True):
                grid.add_row(h, v)
        else:  # a key-value table: the first cell is the label
            grid.add_row(cells[0], "  ".join(cells[1:]))
        parts.append(grid)
        if t.show_header:
            parts.append(Text(""))
    if t.caption:
        parts.append(Text(_plain(console, t.caption) or str(t.caption), style="dim"))
    return Group(*parts)


def fit(console: Console, t: Table, width: int | None = None) -> RenderableType:
    """`t` fitted to `width` (the console's by default) with no name or number split; see the module doc."""
    width = console.width if width is None else width
    fits = [_measure(console, t, i, c) for i, c in enumerate(t.columns)]
    if not fits or any(f is None for f in fits):
        return t  # a cell that is not text: rich's own layout
    checked = [f for f in fits if f is not None]
    if _needed(t, checked, "most") <= width:
        for f in checked:
            f.column.no_wrap = f.column.no_wrap or f.kept
        return t
    if _needed(t, checked, "least") <= width:
        _apply(console, t, checked, width)
        return t
    return blocks(console, t, width)
