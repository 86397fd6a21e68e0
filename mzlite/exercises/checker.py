"""Self-checking exercises for the book's chapters.

A learner writes an answer into a cell and calls ``check("ch1.generators", answer)``. The
answer is compared with a reference *computed by mzlite* (never a typed number), and the cell
shows a tick or a hint. Unanswered exercises (``...`` or ``None``, or a function whose body is
still ``...``) are reported, not failed, so a fresh notebook runs top to bottom. Solution cells
call ``check(..., strict=True)``: a wrong solution then raises, which is how CI keeps every
solution and every checker honest.

Two kinds of exercise:

- a *value*: ``check(key, answer)``;
- *code*: the learner writes a function and passes it, ``check(key, my_function, seed=seed)``;
  the checker calls it on random inputs drawn from ``seed`` (one of them with padded elements),
  compares with mzlite, and when the answer is wrong, recomputes the typical mistakes and says
  which one was made (:func:`diagnose`).

Exercises registered with ``per_seed=True`` derive their inputs from the notebook's ``seed``
parameter, so two students with different seeds do not share numbers; their checker receives
the seed and recomputes the reference. Each chapter registers its exercises with
:func:`exercise`::

    @exercise("ch1.generators", hint="Count M_c g_k, M_l c and M_l g_k separately.")
    def _(answer):
        return answer == 3 + 2 + 2 * 3, "the product has h + L + L h generators"

When the environment variable ``MZLITE_CHECK_LOG`` names a file, every ``check`` appends its
result to it as one JSON line (the book's CI reads it to see every placeholder reported).

The grader trusts none of that. While ``python -m mzlite grade`` executes a submission,
``MZLITE_GRADING_CAPTURE`` names a file and ``check`` only *records* the answer (as plain data,
:mod:`mzlite.exercises.wire`; a function by its name) and says so, without a verdict: the verdicts
are computed afterwards by the grader's own process (:mod:`mzlite.grading.grader`).
"""

from __future__ import annotations

import html
import importlib
import json
import math
import os
import pkgutil
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from ..registry import Registry
from .wire import WireError, encode

Checker = Callable[..., "tuple[bool, str]"]
LOG_ENV = "MZLITE_CHECK_LOG"
CAPTURE_ENV = "MZLITE_GRADING_CAPTURE"
KINDS = ("value", "coding")


@dataclass(frozen=True)
class Exercise:
    key: str
    checker: Checker
    hint: str
    per_seed: bool = False
    kind: str = "value"  # "value" | "coding" (the answer is a function)
    points: float = 1.0  # the default weight in the gradebook (the instructor may override it)


_REGISTRY: Registry[Exercise] = Registry("exercise")


def exercise(
    key: str,
    hint: str = "",
    *,
    per_seed: bool = False,
    kind: str = "value",
    points: float | None = None,
) -> Callable[[Checker], Checker]:
    """Register ``checker(answer) -> (correct, explanation)`` under ``key`` (e.g. ``"ch1.area"``);
    with ``per_seed=True`` the checker is called as ``checker(answer, seed)``. ``kind="coding"``
    marks an exercise answered by a function; ``points`` is its default weight in the gradebook
    (1 for a value exercise, 2 for a coding one)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if points is None:
        points = 2.0 if kind == "coding" else 1.0
    if isinstance(points, bool) or not isinstance(points, int | float) or not points > 0:
        raise ValueError(f"points must be a positive number, got {points!r}")

    def register(checker: Checker) -> Checker:
        # a key twice raises
        _REGISTRY.add(key, Exercise(key, checker, hint, per_seed, kind, float(points)))
        return checker

    return register


def get(key: str) -> Exercise:
    """The registered exercise ``key``; an unknown key raises, listing the known ones."""
    _load_chapters()
    return _REGISTRY[key]


def keys(prefix: str = "") -> list[str]:
    """All registered exercise keys starting with ``prefix`` (e.g. ``"ch1."``)."""
    _load_chapters()
    return sorted(k for k in _REGISTRY if k.startswith(prefix))


class Unanswered(Exception):
    """Raised inside a checker when the learner's function is still a placeholder."""


@dataclass
class Result:
    key: str
    status: str  # "correct" | "wrong" | "unanswered" | "recorded" (while the grader runs)
    message: str
    seed: int | None = None

    def __bool__(self) -> bool:
        return self.status == "correct"

    def _repr_html_(self) -> str:
        colour = {
            "correct": "#1a7f37",
            "wrong": "#cf222e",
            "unanswered": "#9a6700",
            "recorded": "#57606a",
        }[self.status]
        mark = {
            "correct": "&#10004; Correct",
            "wrong": "&#10008; Not yet",
            "unanswered": "&#9998; Not answered yet",
            "recorded": "&#128203; Recorded for grading",
        }[self.status]
        return (
            f'<div class="mz-exercise mz-{self.status}" style="border-left:4px solid {colour};'
            f'padding:0.3em 0.8em;margin:0.3em 0"><b style="color:{colour}">{mark}</b> '
            f"<code>{html.escape(self.key)}</code>: {html.escape(self.message)}</div>"
        )

    def __repr__(self) -> str:
        return f"[{self.status}] {self.key}: {self.message}"


def _unanswered(ex: Exercise) -> str:
    return "replace `...` with your answer and run the cell again." + (
        f" Hint: {ex.hint}" if ex.hint else ""
    )


def check(key: str, answer: object = ..., *, seed: int = 0, strict: bool = False) -> Result:
    """Check ``answer`` (a value, or a function for a coding exercise) for exercise ``key``.

    ``seed``: the notebook's seed, for exercises whose inputs depend on it (ignored by the
    others). ``strict=True`` raises ``AssertionError`` unless the answer is correct."""
    _load_chapters()
    ex = _REGISTRY[key]  # an unknown key raises a KeyError listing the known ones
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int (the notebook's seed parameter), got {seed!r}")
    capture = os.environ.get(CAPTURE_ENV)
    if capture:
        return _record(capture, ex, answer, seed)
    result = verdict(ex, answer, seed)
    _log(result)
    if strict and not result and result.status != "recorded":
        raise AssertionError(f"exercise {key}: {result.message}")
    return result


def verdict(ex: Exercise, answer: object, seed: int = 0) -> Result:
    """The checker's verdict on ``answer`` for seed ``seed``: nothing logged or recorded (the
    grader's own process calls this)."""
    key = ex.key
    if answer is ... or answer is None:
        result = Result(key, "unanswered", _unanswered(ex), seed)
    else:
        try:
            # Checkers build layers and draw inputs; the notebook's own random stream is left as
            # it was, so a chapter computes the same numbers whether or not a check ran.
            with torch.random.fork_rng(devices=[]):
                ok, why = ex.checker(answer, seed) if ex.per_seed else ex.checker(answer)
        except Unanswered as e:
            ok, why = None, " ".join(filter(None, [str(e), _unanswered(ex)]))
        except Exception as e:  # a malformed answer is a wrong answer, with the reason shown
            ok, why = False, f"could not check this answer ({type(e).__name__}: {e})"
        if ok is None:
            result = Result(key, "unanswered", why, seed)
        else:
            hint = f" Hint: {ex.hint}" if (not ok and ex.hint) else ""
            result = Result(key, "correct" if ok else "wrong", why + hint, seed)
    return result


def _record(path: str, ex: Exercise, answer: object, seed: int) -> Result:
    """Grading mode: write the answer down for the grader, judge nothing here."""
    entry: dict = {"key": ex.key, "seed": seed}
    if callable(answer) and not isinstance(answer, type):
        entry["function"] = getattr(answer, "__name__", "")
    else:
        try:
            entry["answer"] = encode(answer)
        except WireError as e:
            entry["unencodable"] = str(e)
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")
    return Result(ex.key, "recorded", "recorded; the grader checks it in its own process", seed)


def _log(result: Result) -> None:
    path = os.environ.get(LOG_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as f:  # one short line per check: append is atomic
            f.write(json.dumps(asdict(result)) + "\n")


def rng(key: str, seed: int) -> torch.Generator:
    """The random generator of exercise ``key`` for the notebook seed ``seed``: the same inputs
    for the learner (who calls the chapter's input function) and for the checker."""
    digest = sum((i + 1) * ord(ch) for i, ch in enumerate(key))  # stable across runs, unlike hash()
    return torch.Generator().manual_seed(1_000_003 * int(seed) + digest)


def student_inputs(
    chapter: int,
    seed: int,
    draw: Callable[[np.random.Generator], dict],
    typed: dict | None = None,
) -> dict:
    """The inputs of a chapter's per-seed exercises for the notebook's ``seed``: ``typed`` (the
    small values the chapter prints; lists and tuples become float64 arrays) for seed 0 when
    given, else ``draw(numpy.random.default_rng([chapter, seed]))``. Every student (seed) gets
    numbers of their own, and the checker, calling the same function, recomputes them."""
    if seed == 0 and typed is not None:
        return {
            k: np.array(v, dtype=np.float64) if isinstance(v, list | tuple) else v
            for k, v in typed.items()
        }
    return draw(np.random.default_rng([chapter, seed]))


def same_number(answer, ref: float, rtol: float = 1e-6, atol: float = 0.0) -> bool:
    """Whether a one-number ``answer`` is ``ref`` within ``rtol`` (relative to ``|ref|``, absolute
    below 1) plus ``atol``. NaN and inf are never right; a bool is not a number (TypeError)."""
    if isinstance(answer, bool):
        raise TypeError("expected a number, got a bool")
    a = float(answer)
    return math.isfinite(a) and abs(a - ref) <= rtol * max(1.0, abs(ref)) + atol


def same_integer(answer, ref: int) -> bool:
    """Whether ``answer`` is the whole number ``ref`` (``3.0`` counts; ``True`` and 3.5 do not)."""
    return not isinstance(answer, bool) and float(answer) == int(answer) == ref


def named_mistake(
    answer,
    mistakes: Sequence[tuple[float, str]],
    otherwise: str,
    *,
    rtol: float = 1e-6,
    integer: bool = False,
) -> str:
    """The feedback for a wrong one-number ``answer``: "that is <name>" for the first of
    ``mistakes`` (pairs of the number a usual slip gives, computed the wrong way, and the slip's
    name) that it equals, else ``otherwise``. A mistake that happens to equal the right answer
    must not be listed (the caller checks the answer first)."""
    for wrong, name in mistakes:
        try:
            hit = same_integer(answer, int(wrong)) if integer else same_number(answer, wrong, rtol)
        except (TypeError, ValueError):
            return otherwise
        if hit and (not integer or float(wrong) == int(wrong)):
            return f"that is {name}"
    return otherwise


def number_exercise(
    key: str,
    reference: Callable[..., float],
    *,
    right: str | Callable[[float], str],
    wrong: str,
    hint: str = "",
    inputs: Callable[[int], dict] | None = None,
    rtol: float = 1e-6,
    mistakes: Callable[..., list[tuple[float, str]]] | None = None,
) -> None:
    """Register an exercise whose answer is one number: ``reference(inputs(seed))`` computes it
    (per seed), or ``reference()`` without ``inputs``. A correct answer shows ``right`` (a format
    string given the reference, ``"{:.4f}"``, or a function of it), a wrong one the usual slip it
    equals, from ``mistakes(inputs(seed))`` (pairs of the slip's value, computed the wrong way,
    and its name; see :func:`named_mistake`), else ``wrong``."""

    def verdict(answer, ex) -> tuple[bool, str]:
        ref = reference() if ex is None else reference(ex)
        if same_number(answer, ref, rtol):
            return True, right(ref) if callable(right) else right.format(ref)
        if mistakes is None:
            return False, wrong
        slips = mistakes() if ex is None else mistakes(ex)
        return False, named_mistake(answer, slips, wrong, rtol=rtol)

    if inputs is None:
        exercise(key, hint)(lambda answer: verdict(answer, None))
    else:
        exercise(key, hint, per_seed=True)(lambda answer, seed: verdict(answer, inputs(seed)))


def call(function, *args):
    """Call the learner's ``function``; a body that is still ``...`` (returns None or Ellipsis)
    is unanswered, not wrong."""
    if not callable(function):
        raise TypeError(f"expected a function (def ...), got {type(function).__name__}")
    out = function(*args)
    if out is None or out is ...:
        raise Unanswered("your function returns nothing yet: write its body, then")
    return out


def _close(a, b, rtol: float, atol: float) -> bool:
    if isinstance(a, tuple | list) or isinstance(b, tuple | list):
        return (
            isinstance(a, tuple | list)
            and isinstance(b, tuple | list)
            and len(a) == len(b)
            and all(_close(x, y, rtol, atol) for x, y in zip(a, b, strict=True))
        )
    a = torch.as_tensor(a, dtype=torch.float64)
    b = torch.as_tensor(b, dtype=torch.float64)
    return a.shape == b.shape and bool(torch.allclose(a, b, rtol=rtol, atol=atol))


def diagnose(
    got,
    reference,
    mistakes: Sequence[tuple[object, str]] = (),
    *,
    what: str = "the result",
    rtol: float = 1e-6,
    atol: float = 1e-9,
) -> tuple[bool, str]:
    """``(correct, message)`` for a learner's output ``got`` against ``reference``; when it is
    wrong, ``mistakes`` (pairs of a typical wrong output, computed the wrong way, and the name of
    that mistake) say which one the learner made. Outputs are tensors or tuples of tensors."""
    if _close(got, reference, rtol, atol):
        return True, f"{what} agrees with mzlite"
    for wrong, name in mistakes:
        if _close(got, wrong, rtol, atol):
            return False, f"{what} is what you get with {name}"
    if not isinstance(reference, tuple | list):
        want, have = tuple(torch.as_tensor(reference).shape), tuple(torch.as_tensor(got).shape)
        if have != want:
            return False, f"{what} has shape {have}, expected {want}"
    return False, f"{what} differs from mzlite's"


def _load_chapters() -> None:
    # Chapter checkers live in their own small modules so that this one stays generic.
    # this file's folder, not ``mzlite.exercises.__path__``: the package imports this module
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if re.fullmatch(r"ch\d+", info.name):
            importlib.import_module(f"{__package__}.{info.name}")
