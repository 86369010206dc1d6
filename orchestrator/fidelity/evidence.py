"""What a recorded observation says about the world it was made in: the absolute paths it lists
or reports missing, and the dates it prints (`ls -l`, `ls --full-time`, `stat`, `find -printf`,
`date`). Pure text reading; `context.py` weighs it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import PurePosixPath

MONTHS = {m: i for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), start=1)}
MISSING = "No such file or directory"
# Lines that report a failure: their paths are not listed as present.
FAILURE = re.compile(r"No such file|cannot |Cannot |Permission denied|not found|Not a directory|[Ii]nvalid|rror")
PATH = re.compile(r"(?<![\w.~$-])/(?:[\w.+@,=-]+/?)+")
_M = "(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
# `ls -l`: "... 153 May 26 10:10 archive.tar.gz", or "... Apr 18  2022 name" for an old or future file.
LS = re.compile(rf"(?:^|\s){_M}\s+(\d{{1,2}})\s+(?:(\d{{1,2}}):(\d{{2}})|(\d{{4}}))\s+(\S.*?)\s*$")
# ISO: `ls --full-time`, `stat`, `find -printf '%TY-%Tm-%Td %TH:%TM %p'`; a name may follow.
ISO = re.compile(r"(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?(?:\s*(?:[+-]\d{2}:?\d{2}|Z|UTC))?"
                 r"(?:\s+(\S.*?))?\s*$")
# `date`: "Fri May 26 09:04:12 UTC 2023".
DATE = re.compile(rf"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)\s+{_M}\s+(\d{{1,2}})\s+(\d{{2}}):(\d{{2}}):(\d{{2}})\s+"
                  r"(?:[A-Z]{2,5}\s+)?(\d{4})\b")


def paths_missing(text: str) -> set[str]:
    """Absolute paths the observation reports missing ("No such file or directory")."""
    return {_norm(p) for line in text.splitlines() if MISSING in line for p in PATH.findall(line)}


def paths_listed(text: str) -> set[str]:
    """Absolute paths printed on lines that report no failure (found, listed)."""
    return {_norm(p) for line in text.splitlines() if not FAILURE.search(line) for p in PATH.findall(line)}


def _norm(path: str) -> str:
    path = re.sub(r"/+", "/", path).rstrip("/.,") or "/"
    return path


LS_FORM, ISO_FORM, CLOCK_FORM = "ls", "iso", "date"


@dataclass(frozen=True)
class Dated:
    """A date printed in an observation, in one of three forms: `ls -l`'s (`year` False when it
    printed a time instead, for a file less than six months old), an ISO date, or the output of
    `date` (the clock itself). `name`: the base name of the file it dates, "" when none."""

    when: datetime
    form: str
    name: str = ""
    year: bool = True


def dates(text: str, default_year: int) -> list[Dated]:
    """Every date the observation prints; a date without a year (`ls -l` of a recent file) is
    put in `default_year`."""
    found: list[Dated] = []
    for line in text.splitlines():
        found += _line_dates(line, default_year)
    return found


def _line_dates(line: str, default_year: int) -> list[Dated]:
    clocks = [Dated(_at(int(m[6]), MONTHS[m[1]], int(m[2]), int(m[3]), int(m[4]), int(m[5])), CLOCK_FORM)
              for m in DATE.finditer(line)]
    if clocks:
        return [c for c in clocks if c.when.year > 1]
    if match := LS.search(line):
        month, day, hour, minute, year, name = match.groups()
        has_year = year is not None
        when = _at(int(year) if has_year else default_year, MONTHS[month], int(day), int(hour or 0), int(minute or 0))
        return [Dated(when, LS_FORM, base_name(name), has_year)] if when.year > 1 else []
    if match := ISO.search(line):
        year, month, day, hour, minute, second, name = match.groups()
        when = _at(int(year), int(month), int(day), int(hour), int(minute), int(second or 0))
        return [Dated(when, ISO_FORM, base_name(name or ""))] if when.year > 1 else []
    return []


def _at(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    """The moment, in UTC (the containers' zone); datetime.min when the text is no real date."""
    try:
        return datetime(year, month, day, hour, minute, second, tzinfo=UTC)
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)


def base_name(name: str) -> str:
    """The base name of a listed entry: a symlink's target, quotes and `ls -F` marks dropped."""
    name = name.split(" -> ")[0].strip().strip("'\"")
    name = name.rstrip("/*@|=")
    return PurePosixPath(name).name if name not in ("", ".", "..") else ""
