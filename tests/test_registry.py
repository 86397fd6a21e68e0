"""mzlite.registry: lookups, the error that lists valid names, duplicates, order."""

import pytest

from mzlite import tasks as T
from mzlite.registry import Registry, UnknownName


def test_lookup_order_and_mapping_behaviour():
    reg = Registry("model", [("b", 2), ("a", 1)])

    @reg.register("c")
    def c():
        return 3

    assert reg["a"] == 1 and reg["c"] is c and list(reg) == ["b", "a", "c"] and len(reg) == 3
    assert "a" in reg and "z" not in reg and ["unhashable"] not in reg
    assert reg.get("z") is None and dict(reg) == {"b": 2, "a": 1, "c": c}


def test_unknown_name_lists_the_valid_ones_and_is_both_key_and_value_error():
    reg = Registry("table", [("tab:meb", 0), ("tab:hull", 1)])
    message = r"^unknown table name 'tab:mbe'; valid tables: tab:meb, tab:hull$"
    for kind in (KeyError, ValueError, UnknownName):
        with pytest.raises(kind, match=message):
            reg["tab:mbe"]
    with pytest.raises(UnknownName, match="valid exercises: none"):
        Registry("exercise", plural="exercises")["ch1.x"]
    with pytest.raises(UnknownName, match=r"unknown table name \['x'\]"):
        reg[["x"]]


def test_names_are_unique_non_empty_strings():
    reg = Registry("task", [("a", 1)])
    with pytest.raises(ValueError, match="task 'a' is registered twice"):
        reg.add("a", 2)
    with pytest.raises(ValueError, match="non-empty string"):
        reg.add("", 2)
    assert reg["a"] == 1


def test_tasks_are_a_registry():
    assert isinstance(T.TASKS, Registry) and "meb_radius" in T.TASKS
    with pytest.raises(ValueError, match="unknown task name 'meb'; valid tasks: .*meb_radius"):
        T.make_task("meb", 3)


def test_aliases_find_their_target_and_stay_out_of_the_listing():
    reg = Registry("model", [("st", 1), ("mz_full", 2)])
    reg.alias("standard", "st")
    assert reg["standard"] == 1 and "standard" in reg and list(reg) == ["st", "mz_full"]
    assert reg.canonical("standard") == "st" and reg.canonical("st") == "st"
    with pytest.raises(UnknownName, match=r"valid models: st, mz_full \(aliases: standard = st\)"):
        reg["transformer"]
    with pytest.raises(ValueError, match="registered twice"):
        reg.alias("st", "mz_full")
    with pytest.raises(ValueError, match="registered twice"):
        reg.add("standard", 3)
    with pytest.raises(UnknownName, match="unknown model name 'nope'"):
        reg.alias("x", "nope")


def test_registered_holds_a_name_for_a_with_block_only():
    reg = Registry("model", [("a", 1)])
    reg.alias("first", "a")
    with reg.registered("b", 2) as obj:
        assert obj == 2 and reg["b"] == 2 and list(reg) == ["a", "b"]
        reg.alias("second", "b")
        with pytest.raises(ValueError, match="registered twice"):
            reg.add("b", 3)
    assert list(reg) == ["a"] and "b" not in reg and "second" not in reg
    assert reg["first"] == 1
    with pytest.raises(RuntimeError), reg.registered("c", 3):
        raise RuntimeError("a failing test still leaves the registry as it was")
    assert "c" not in reg
