"""Lines of code in Python sources: what ``wc -l`` counts, less blank lines, comment-only lines and
docstrings (the first string statement of a module, class or function), the count ``radon raw``
calls SLOC. Issue 50's size target reads it for ``mzlite/repro``::

    python tools/code_lines.py mzlite/repro          # per file, then the total
    python tools/code_lines.py mzlite/repro --total  # the total alone
"""

from __future__ import annotations

import argparse
import ast
import io
import sys
import tokenize
from pathlib import Path

_NOT_CODE = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
             tokenize.ENCODING, tokenize.ENDMARKER}  # fmt: skip


def _docstring_lines(tree: ast.Module) -> set[int]:
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                if isinstance(first.value.value, str):
                    out.update(range(first.lineno, first.end_lineno + 1))
    return out


def code_lines(source: str) -> int:
    """The lines of ``source`` that hold code: a token other than a comment or a line break,
    outside a docstring."""
    lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in _NOT_CODE:
            lines.update(range(tok.start[0], tok.end[0] + 1))
    return len(lines - _docstring_lines(ast.parse(source)))


def count(root: Path) -> dict[str, tuple[int, int]]:
    """``{path: (code lines, all lines)}`` of every ``.py`` file under ``root``."""
    files = [root] if root.is_file() else sorted(root.rglob("*.py"))
    return {str(f): (code_lines(t := f.read_text()), len(t.splitlines())) for f in files}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path", type=Path, help="a .py file or a folder")
    ap.add_argument("--total", action="store_true", help="print the total code lines alone")
    args = ap.parse_args(argv)
    if not args.path.exists():
        ap.error(f"path: {args.path} does not exist; give a .py file or a folder")
    counts = count(args.path)
    code, every = sum(c for c, _ in counts.values()), sum(n for _, n in counts.values())
    if args.total:
        print(code)
        return 0
    for path, (c, n) in sorted(counts.items(), key=lambda kv: kv[1]):
        print(f"{c:6d} {n:6d}  {path}")
    print(f"{code:6d} {every:6d}  total: lines of code, all lines ({len(counts)} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
