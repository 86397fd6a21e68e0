"""tools/code_lines.py, the count of issue 50's size target, and the target itself."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("code_lines", ROOT / "tools" / "code_lines.py")
code_lines = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(code_lines)


def test_code_lines_leave_out_blanks_comments_and_docstrings_only():
    source = '''"""A module docstring
over two lines."""

import os  # a comment on a code line counts


# a comment-only line does not
def f(x):
    """A function's docstring."""
    s = """a string that is not a docstring
    counts on each of its lines"""
    return (x,
            s)


class C:
    "a class docstring"
    y = "a plain string"
'''
    # import, def, s = (2 lines), return (2 lines), class, y
    assert code_lines.code_lines(source) == 8


def test_the_cli_names_a_missing_path(capsys):
    with pytest.raises(SystemExit) as e:
        code_lines.main(["no/such/place"])
    assert e.value.code == 2
    assert "path: no/such/place does not exist" in capsys.readouterr().err


BUDGET = 7_000  # issue 50: the reproduction layer, every capability kept


def test_the_reproduction_layer_keeps_its_budget():
    counts = code_lines.count(ROOT / "mzlite" / "repro")
    total = sum(c for c, _ in counts.values())
    largest = sorted(counts.items(), key=lambda kv: -kv[1][0])[:3]
    assert total <= BUDGET, (
        f"mzlite/repro has {total:,} lines of code, over its budget of {BUDGET:,} "
        f"(largest: {', '.join(f'{Path(p).name} {c}' for p, (c, _) in largest)}); see "
        "CONTRIBUTING.md, 'The reproduction layer has a budget'"
    )
