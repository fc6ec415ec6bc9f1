# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""When a log line was written, from the timestamp the framework put on it (UTC assumed).

Three shapes cover the stacks we read: absl/glog (JAX, XLA, MaxText) ``I1121 10:15:00.123456``
(no year: the year of ``reference``), ISO-like ``2025-11-19 18:02:33[.,]123`` or
``2025-11-19T18:02:33`` (Python logging, RCCL, Megatron's ``[2025-11-19 18:02:33]``), and epoch
seconds in brackets as UCX prints them, ``[1721186746.658016]``.
"""
from __future__ import annotations

import calendar
import re
import time
from typing import Optional

_ABSL = re.compile(r"^(?:\[[^\]]*\]:?\s*)?[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?\s")
_ISO = re.compile(r"(?<!\d)(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,6}))?")
_EPOCH = re.compile(r"^\[(1[5-9]\d{8}|2\d{9})\.(\d{1,6})\]")
SEARCH_CHARS = 80  # a timestamp sits at the start of the line, after a prefix at most


def line_time(text: str, reference: Optional[float] = None) -> Optional[float]:
    """Epoch seconds of the line's timestamp, or None when it has none."""
    head = text[:SEARCH_CHARS]
    match = _EPOCH.match(head)
    if match:
        return float("%s.%s" % match.groups())
    match = _ISO.search(head)
    if match:
        return epoch(*(int(part) for part in match.groups()[:6]), fraction=match.group(7))
    match = _ABSL.match(head)
    if match:
        year = time.gmtime(reference if reference is not None else time.time()).tm_year
        return epoch(year, *(int(part) for part in match.groups()[:5]), fraction=match.group(6))
    return None


def epoch(year: int, month: int, day: int, hour: int, minute: int, second: int,
          fraction: Optional[str] = None) -> Optional[float]:
    try:
        seconds = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0))
    except (OverflowError, ValueError):
        return None
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour < 24 and minute < 60 and second < 61):
        return None
    return seconds + (float("0." + fraction) if fraction else 0.0)
