"""Things found by name: tasks, models, tables, exercises. One small class serves them all.

A ``Registry`` is a read-only mapping from names to objects, in registration order. Looking up
a name it does not hold raises ``UnknownName`` (a ``KeyError`` and a ``ValueError``) whose message
lists every valid name, so a typo is answered with the list to pick from::

    MODELS = Registry("model")

    @MODELS.register("deepsets")
    def deep_sets(...): ...

    MODELS["deepsets"]   # the object
    MODELS["deepset"]    # UnknownName: unknown model name 'deepset'; valid models: deepsets, ...
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Generic, TypeVar

T = TypeVar("T")


class UnknownName(KeyError, ValueError):
    """A name a registry does not hold; the message lists the valid ones. Both a ``KeyError``
    (it is a failed lookup) and a ``ValueError`` (it is a bad argument), so callers may catch
    either."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class Registry(Mapping[str, T], Generic[T]):
    """Named objects of one ``kind`` (e.g. ``"task"``), in registration order.

    ``plural`` is the word the error message uses for several of them (default ``kind + "s"``)."""

    def __init__(self, kind: str, items: Iterable[tuple[str, T]] = (), *, plural: str = ""):
        self.kind = kind
        self.plural = plural or f"{kind}s"
        self._items: dict[str, T] = {}
        self._aliases: dict[str, str] = {}
        for name, obj in items:
            self.add(name, obj)

    def add(self, name: str, obj: T) -> T:
        """Register ``obj`` under ``name``; a name registered twice raises ValueError."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a {self.kind} name must be a non-empty string, got {name!r}")
        if name in self._items or name in self._aliases:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._items[name] = obj
        return obj

    def alias(self, alias: str, name: str) -> None:
        """Let ``alias`` find what ``name`` holds; iteration lists ``name`` only."""
        self[name]  # an unknown target raises here
        if alias in self._items or alias in self._aliases:
            raise ValueError(f"{self.kind} {alias!r} is registered twice")
        self._aliases[alias] = name

    def canonical(self, name: str) -> str:
        """The registered name that ``name`` (a name or an alias) stands for."""
        self[name]
        return self._aliases.get(name, name)

    @contextmanager
    def registered(self, name: str, obj: T) -> Iterator[T]:
        """Hold ``obj`` under ``name`` for the length of a ``with`` block, then forget it (and any
        alias to it): how a test walks a contributor's journey with a throwaway example."""
        self.add(name, obj)
        try:
            yield obj
        finally:
            del self._items[name]
            self._aliases = {a: n for a, n in self._aliases.items() if n != name}

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator form of :meth:`add`: ``@REGISTRY.register("name")``."""
        return lambda obj: self.add(name, obj)

    def __getitem__(self, name: str) -> T:
        try:
            return self._items[self._aliases.get(name, name)]
        except (KeyError, TypeError):
            raise UnknownName(self.unknown_message(name)) from None

    def unknown_message(self, name) -> str:
        valid = ", ".join(self._items) or "none"
        aliases = ", ".join(f"{a} = {n}" for a, n in self._aliases.items())
        return f"unknown {self.kind} name {name!r}; valid {self.plural}: {valid}" + (
            f" (aliases: {aliases})" if aliases else ""
        )

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, name: object) -> bool:
        try:
            return name in self._items or name in self._aliases
        except TypeError:  # an unhashable name is simply not registered
            return False

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {list(self._items)})"
