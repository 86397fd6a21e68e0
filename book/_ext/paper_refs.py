"""Sphinx roles that name the paper's theorems, tables, equations and figures as its reader sees
them, from the numbering ``mzlite.repro.paper`` derives from the LaTeX source (data/paper/labels.json).

    {paper}`thm:tdof-depth`         ->  Theorem 2            (the title in a tooltip)
    {paper}`thm:bottleneck`(a)      ->  Theorem 1(a)
    {paper-title}`thm:tdof-depth`   ->  Theorem 2 (Depth separation via TDOF, worst-case over F_k)

A label the paper does not have is a build error (the book is built with -W), so a renamed or
renumbered label cannot leave a stale name on a page.
"""

from __future__ import annotations

from docutils import nodes

from mzlite.repro.paper import paper_label

PAPER = "Zhang & Alanwar, Matrix Zonotopic Attention (2026)"


def _role(with_title: bool):
    def role(name, rawtext, text, lineno, inliner, options=None, content=None):
        label = text.strip()
        try:
            entry = paper_label(label)
        except KeyError as err:
            msg = inliner.reporter.error(str(err.args[0]), line=lineno)
            return [inliner.problematic(rawtext, rawtext, msg)], [msg]
        shown = entry["text"]
        if with_title and entry["title"]:
            shown = f"{shown} ({entry['title']})"
        hint = f"{entry['text']}: {entry['title']}" if entry["title"] else entry["text"]
        node = nodes.abbreviation(rawtext, shown, explanation=f"{hint}. In {PAPER}.")
        node["classes"].append("paper-ref")
        return [node], []

    return role


def setup(app):
    app.add_role("paper", _role(with_title=False))
    app.add_role("paper-title", _role(with_title=True))
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
