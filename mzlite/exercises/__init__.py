"""Self-checking exercises of the book: :mod:`mzlite.exercises.checker` holds ``check`` and the
registry, and ``mzlite.exercises.chN`` the checkers and exercise inputs of chapter N."""

from .checker import Exercise, Result, check, exercise, keys

__all__ = ["Exercise", "Result", "check", "exercise", "keys"]
