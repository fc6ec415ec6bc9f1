# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Host lists short enough to read at 500 nodes: ``node[001-040,077]`` ranges, cut with ``(+N more)``.

Names with a number (the last run of digits of the short name: ``gpu-a017``, ``node7.dc1``) are grouped
by what surrounds it, and consecutive numbers become ranges, as Slurm writes its host lists. A group
whose numbers are zero-padded keeps their width (``node[001-040]``); ``node9`` and ``node10`` are one
group (``node[9-10]``). Other names are listed as they are.
"""
from __future__ import annotations

import functools
import re
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

TRAILING_NUMBER = re.compile(r"^(.*?)(\d+)(\D*)$")
DIGITS = re.compile(r"(\d+)")


@functools.lru_cache(maxsize=8192)
def natural_key(name: str) -> Tuple:
    """node2 before node10."""
    return tuple((0, int(part), part) if part.isdigit() else (1, 0, part) for part in DIGITS.split(str(name)))


class _Group:
    def __init__(self, prefix: str, suffix: str, width: int) -> None:
        self.prefix, self.suffix, self.width = prefix, suffix, width
        self.numbers: List[int] = []

    def ranges(self) -> List[Tuple[str, int]]:
        """(text, how many hosts) for each run of consecutive numbers."""
        runs: List[Tuple[str, int]] = []
        numbers = sorted(set(self.numbers))
        start = previous = numbers[0]
        for number in numbers[1:] + [None]:
            if number is not None and number == previous + 1:
                previous = number
                continue
            low, high = self.digits(start), self.digits(previous)
            runs.append((low if start == previous else "%s-%s" % (low, high), previous - start + 1))
            if number is not None:
                start = previous = number
        return runs

    def digits(self, number: int) -> str:
        return str(number).zfill(self.width)

    def text(self, ranges: Sequence[str]) -> str:
        if len(ranges) == 1 and "-" not in ranges[0]:
            return "%s%s%s" % (self.prefix, ranges[0], self.suffix)
        return "%s[%s]%s" % (self.prefix, ",".join(ranges), self.suffix)


@functools.lru_cache(maxsize=8192)
def _parts(host: str) -> Optional[Tuple[str, str, str]]:
    """(prefix, digits, suffix) of a name with a number in its short name, else None."""
    short, dot, domain = host.partition(".")
    match = TRAILING_NUMBER.match(short)
    if not match:
        return None
    prefix, digits, suffix = match.groups()
    return prefix, digits, suffix + dot + domain


def _groups(hosts: Iterable[str]) -> List[object]:
    """Groups and plain names, in natural order of their first host."""
    parsed = []
    padded: Dict[Tuple[str, str], set] = {}
    for host in sorted(set(str(h) for h in hosts), key=natural_key):
        parts = _parts(host)
        parsed.append((host, parts))
        if parts is None:
            continue
        prefix, digits, suffix = parts
        if len(digits) > 1 and digits.startswith("0"):
            padded.setdefault((prefix, suffix), set()).add(len(digits))
    groups: Dict[Tuple[str, str, int], _Group] = {}
    ordered: List[object] = []
    for host, parts in parsed:
        if parts is None:
            ordered.append(host)
            continue
        prefix, digits, suffix = parts
        width = len(digits) if len(digits) in padded.get((prefix, suffix), ()) else 0
        key = (prefix, suffix, width)
        if key not in groups:
            groups[key] = _Group(prefix, suffix, width)
            ordered.append(groups[key])
        groups[key].numbers.append(int(digits))
    return ordered


def compact_hosts(hosts: Iterable[str], max_chars: Optional[int] = None) -> str:
    """``node[001-040,077], login1``; with ``max_chars``, ranges that do not fit become ``(+N more)``."""
    pieces: List[Tuple[object, str, int]] = []
    for group in _groups(hosts):
        if isinstance(group, _Group):
            pieces.extend((group, text, count) for text, count in group.ranges())
        else:
            pieces.append((None, str(group), 1))
    total = sum(count for dummy, dummy2, count in pieces)
    shown: List[Tuple[object, List[str]]] = []
    shown_count = 0
    for owner, text, count in pieces:
        candidate = _extend(shown, owner, text)
        more = total - shown_count - count
        tail = " (+%d more)" % more if more else ""
        if max_chars is not None and shown and len(_render(candidate) + tail) > max_chars:
            break
        shown, shown_count = candidate, shown_count + count
    rest = total - shown_count
    return _render(shown) + (" (+%d more)" % rest if rest else "")


def _extend(shown: List[Tuple[object, List[str]]], owner: object, text: str) -> List[Tuple[object, List[str]]]:
    if owner is not None and shown and shown[-1][0] is owner:
        return shown[:-1] + [(owner, shown[-1][1] + [text])]
    return shown + [(owner, [text])]


def _render(shown: Sequence[Tuple[object, List[str]]]) -> str:
    return ", ".join(owner.text(texts) if isinstance(owner, _Group) else texts[0] for owner, texts in shown)


def names_with_more(hosts: Sequence[str], shown: int = 2) -> str:
    """``node1, node7 (+38 more)``: the first names as they are, for lists whose order matters."""
    names = [str(h) for h in hosts]
    head = ", ".join(names[:shown])
    return head + (" (+%d more)" % (len(names) - shown) if len(names) > shown else "")
