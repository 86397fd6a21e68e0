"""Self-checking exercises for the book's chapters.

A learner writes an answer into a cell and calls ``check("ch1.generators", answer)``. The
answer is compared with a reference *computed by mzlite* (never a typed number), and the cell
shows a tick or a hint. Unanswered exercises (``...`` or ``None``) are reported, not failed, so a
fresh notebook runs top to bottom. Solution cells call ``check(..., strict=True)``: a wrong
solution then raises, which is how CI keeps every solution and every checker honest.

Each chapter registers its exercises with :func:`exercise`::

    @exercise("ch1.generators", hint="Count M_c g_k, M_l c and M_l g_k separately.")
    def _(answer):
        return answer == 3 + 2 + 2 * 3, "the product has h + L + L h generators"
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import dataclass

Checker = Callable[[object], "tuple[bool, str]"]


@dataclass(frozen=True)
class Exercise:
    key: str
    checker: Checker
    hint: str


_REGISTRY: dict[str, Exercise] = {}


def exercise(key: str, hint: str = "") -> Callable[[Checker], Checker]:
    """Register ``checker(answer) -> (correct, explanation)`` under ``key`` (e.g. ``"ch1.volume"``)."""

    def register(checker: Checker) -> Checker:
        if key in _REGISTRY:
            raise ValueError(f"exercise key {key!r} is registered twice")
        _REGISTRY[key] = Exercise(key, checker, hint)
        return checker

    return register


def keys(prefix: str = "") -> list[str]:
    """All registered exercise keys starting with ``prefix`` (e.g. ``"ch1."``)."""
    _load_chapters()
    return sorted(k for k in _REGISTRY if k.startswith(prefix))


@dataclass
class Result:
    key: str
    status: str  # "correct" | "wrong" | "unanswered"
    message: str

    def __bool__(self) -> bool:
        return self.status == "correct"

    def _repr_html_(self) -> str:
        colour = {"correct": "#1a7f37", "wrong": "#cf222e", "unanswered": "#9a6700"}[self.status]
        mark = {
            "correct": "&#10004; Correct",
            "wrong": "&#10008; Not yet",
            "unanswered": "&#9998; Not answered yet",
        }[self.status]
        return (
            f'<div class="mz-exercise mz-{self.status}" style="border-left:4px solid {colour};'
            f'padding:0.3em 0.8em;margin:0.3em 0"><b style="color:{colour}">{mark}</b> '
            f"<code>{html.escape(self.key)}</code>: {html.escape(self.message)}</div>"
        )

    def __repr__(self) -> str:
        return f"[{self.status}] {self.key}: {self.message}"


def check(key: str, answer: object = ..., *, strict: bool = False) -> Result:
    """Check ``answer`` for exercise ``key``; ``strict=True`` raises ``AssertionError`` unless correct."""
    _load_chapters()
    if key not in _REGISTRY:
        raise KeyError(f"unknown exercise {key!r}; known: {', '.join(sorted(_REGISTRY)) or 'none'}")
    ex = _REGISTRY[key]
    if answer is ... or answer is None:
        result = Result(
            key,
            "unanswered",
            "replace `...` with your answer and run the cell again."
            + (f" Hint: {ex.hint}" if ex.hint else ""),
        )
    else:
        try:
            ok, why = ex.checker(answer)
        except Exception as e:  # a malformed answer is a wrong answer, with the reason shown
            ok, why = False, f"could not check this answer ({type(e).__name__}: {e})"
        hint = f" Hint: {ex.hint}" if (not ok and ex.hint) else ""
        result = Result(key, "correct" if ok else "wrong", why + hint)
    if strict and not result:
        raise AssertionError(f"exercise {key}: {result.message}")
    return result


def _load_chapters() -> None:
    # Chapter checkers live in their own small modules so that this one stays generic.
    import importlib
    import pkgutil

    from . import __path__ as pkg_path  # the mzlite.exercises package

    for info in pkgutil.iter_modules(pkg_path):
        if re.fullmatch(r"ch\d+", info.name):
            importlib.import_module(f"{__package__}.{info.name}")
