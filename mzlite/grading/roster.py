"""A class roster: one student a line, ``name`` or ``name,seed`` (``#`` starts a comment).

The same file makes the students' copies (``book/_scripts/make_student.py --roster``, which
writes each student's seed into their notebooks) and grades them (``--roster`` of the grader,
which judges every answer for the roster's seed, whatever the notebook claims, and lists absent
students). Without a seed, one is derived from the name, the same on every machine.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

NAME = re.compile(r"[\w.-]+")


def seed_for(name: str) -> int:
    """A stable seed from a student's name (the same on every machine, unlike hash())."""
    return int(hashlib.sha256(name.encode()).hexdigest()[:8], 16) % 1_000_000


def read_roster(path: Path) -> list[tuple[str, int]]:
    """``[(name, seed)]`` in file order; ValueError naming the line for a bad name, a bad seed
    or a name listed twice."""
    path = Path(path)
    students, seen = [], set()
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, seed = (s.strip() for s in line.partition(","))
        if not NAME.fullmatch(name):
            raise ValueError(
                f"{path}:{n}: a name may hold letters, digits, '.', '-' and '_': {name!r}"
            )
        if seed and not seed.isdigit():
            raise ValueError(f"{path}:{n}: the seed must be a non-negative integer, got {seed!r}")
        if name in seen:
            raise ValueError(f"{path}:{n}: {name!r} is listed twice")
        seen.add(name)
        students.append((name, int(seed) if seed else seed_for(name)))
    return students
