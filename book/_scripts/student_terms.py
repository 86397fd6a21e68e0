"""Glossary terms and citations that work in a student copy opened in JupyterLab.

The book resolves ``{term}`` against its glossary page and ``{cite}`` against book/references.bib
(sphinxcontrib-bibtex). A copy opened in JupyterLab has neither: jupyterlab-myst resolves a term
only within one document and reads no .bib file ("Citation Not Found"); a link to a label in
another cell does not even scroll there (JupyterLab draws only the cells in view). So each
markdown cell gets what it uses, inside itself, as MyST footnotes (jupyterlab-myst shows a
footnote's text when the pointer rests on its number):

- ``{term}`text <target>``` becomes ``text[^term-target]``, the footnote the term's definition
  from book/glossary.md;
- ``{cite}`key``` becomes ``Author (Year)[^ref-key]`` (two authors: "A and B", more: "A et al."),
  ``{cite:p}`` the same in parentheses, the footnote the full reference from book/references.bib;
- a last markdown cell, "Terms and references of this chapter", lists each term the chapter uses
  (and each term their definitions use) with its definition, and each work it cites.
"""

from __future__ import annotations

import codecs
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GLOSSARY = ROOT / "book" / "glossary.md"
REFERENCES = ROOT / "book" / "references.bib"
SECTION_TITLE = "Terms and references of this chapter"

TERM_ROLE = re.compile(r"\{term\}`([^`<]+?)\s*(?:<([^`>]+)>)?`(\w*)")
CITE_ROLE = re.compile(r"\{cite(?::(p|t))?\}`([^`]+)`")


def term_label(target: str) -> str:
    """The footnote label of a glossary term: ``term-`` and the term, lower case, words joined
    by -."""
    return "term-" + re.sub(r"[^a-z0-9]+", "-", target.lower()).strip("-")


def ref_label(key: str) -> str:
    """The footnote label of a work: ``ref-`` and its key, lower case (labels ignore case)."""
    return "ref-" + re.sub(r"[^a-z0-9]+", "-", key.lower()).strip("-")


@functools.cache
def glossary(path: Path = GLOSSARY) -> dict[str, str]:
    """Term (as the glossary spells it) -> its definition (MyST, as one paragraph: a footnote or
    a list item holds one), from the ``{glossary}`` block of ``path``."""
    text = path.read_text()
    start = re.search(r"(?m)^```\{glossary\}\n", text)
    if start is None:
        raise ValueError(f"{path} has no ```{{glossary}} block")
    block = text[start.end() : text.index("\n```", start.end())]
    entries: dict[str, list[str]] = {}
    term = None
    for line in block.split("\n"):
        if line.strip() and not line[0].isspace():
            term = line.strip()
            entries[term] = []
        elif term is not None:
            entries[term].append(line.strip())
    return {term: " ".join(" ".join(lines).split()) for term, lines in entries.items()}


def _latex_text(value: str) -> str:
    return codecs.decode(value, "ulatex").replace("{", "").replace("}", "")


@functools.cache
def bibliography(path: Path = REFERENCES) -> dict[str, dict[str, str]]:
    """Key -> ``{"cite": "Author (Year)" text, "paren": "Author, Year", "full": reference}``."""
    import latexcodec  # noqa: F401 (registers the "ulatex" codec)
    from pybtex.database import parse_file

    works = {}
    for key, entry in parse_file(str(path)).entries.items():
        people = entry.persons.get("author", [])
        last = [_latex_text(" ".join(p.prelast_names + p.last_names)) for p in people]
        names = (
            last[0]
            if len(last) == 1
            else " and ".join(last)
            if len(last) == 2
            else f"{last[0]} et al."
        )
        year = entry.fields.get("year", "n.d.")
        full = [
            _latex_text(" ".join(p.first_names + p.middle_names + p.prelast_names + p.last_names))
            for p in people
        ]
        full_names = ", ".join(full[:-1]) + " and " + full[-1] if len(full) > 1 else "".join(full)
        where = next(
            (
                _latex_text(entry.fields[f])
                for f in ("journal", "booktitle", "school", "publisher", "note")
                if f in entry.fields
            ),
            "",
        )
        title = _latex_text(entry.fields.get("title", key))
        works[key] = {
            "cite": f"{names} ({year})",
            "paren": f"{names}, {year}",
            "full": f"{full_names} ({year}). *{title}*." + (f" {where}." if where else ""),
        }
    labels = [ref_label(k) for k in works]
    if len(set(labels)) != len(labels):
        raise ValueError(f"two keys of {path} give the same label: {sorted(labels)}")
    return works


def _canonical_term(target: str) -> str:
    terms = glossary()
    if target in terms:
        return target
    folded = {t.lower(): t for t in terms}
    if target.lower() not in folded:
        raise KeyError(f"{{term}} target {target!r} is not in {GLOSSARY.name}")
    return folded[target.lower()]


def _plain(text: str) -> str:
    """A definition as footnote or list text: its own roles as plain "term" and "Author (Year)"."""
    works = bibliography()

    def cite(m: re.Match) -> str:
        cited = [k.strip() for k in re.split(r"[,;]", m.group(2)) if k.strip()]
        form = "paren" if m.group(1) == "p" else "cite"
        text = "; ".join(works[k][form] for k in cited)
        return f"({text})" if form == "paren" else text

    return CITE_ROLE.sub(cite, TERM_ROLE.sub(lambda m: m.group(1).strip(), text))


def rewrite_roles(text: str, terms: set[str] | None = None, keys: set[str] | None = None) -> str:
    """``text`` (one markdown cell) with its term and cite roles as text and footnotes, the
    footnotes' definitions appended; the terms and keys it uses are added to ``terms`` and
    ``keys``. An unknown term or key raises KeyError."""
    works, defs = bibliography(), glossary()
    notes: dict[str, str] = {}

    def term(m: re.Match) -> str:
        shown = m.group(1).strip()
        target = _canonical_term((m.group(2) or shown).strip())
        if terms is not None:
            terms.add(target)
        label = term_label(target)
        notes[label] = f"**{target}**: {_plain(defs[target])}"
        return f"{shown}{m.group(3)}[^{label}]"

    def cite(m: re.Match) -> str:
        cited = [k.strip() for k in re.split(r"[,;]", m.group(2)) if k.strip()]
        unknown = [k for k in cited if k not in works]
        if unknown:
            raise KeyError(f"cited keys not in {REFERENCES.name}: {unknown}")
        if keys is not None:
            keys.update(cited)
        form = "paren" if m.group(1) == "p" else "cite"
        for k in cited:
            notes[ref_label(k)] = works[k]["full"]
        shown = "; ".join(f"{works[k][form]}[^{ref_label(k)}]" for k in cited)
        return f"({shown})" if form == "paren" else shown

    out = CITE_ROLE.sub(cite, TERM_ROLE.sub(term, text))
    if not notes:
        return out
    return out.rstrip("\n") + "\n\n" + "\n".join(f"[^{k}]: {v}" for k, v in notes.items()) + "\n"


def section(terms: set[str], keys: set[str]) -> str:
    """The markdown of the last cell: every term of ``terms`` (and of the definitions they use)
    with its definition, every work of ``keys`` (and those the definitions cite) referenced."""
    defs, works = glossary(), bibliography()
    todo, entries = sorted(terms), {}
    while todo:  # a definition may use other terms: they are defined here too
        t = todo.pop()
        if t in entries:
            continue
        entries[t] = _plain(defs[t])
        todo += [_canonical_term((m.group(2) or m.group(1)).strip())
                 for m in TERM_ROLE.finditer(defs[t])]  # fmt: skip
        keys |= {
            k.strip() for m in CITE_ROLE.finditer(defs[t]) for k in re.split(r"[,;]", m.group(2))
        }
    parts = [f"## {SECTION_TITLE}"]
    if entries:
        parts.append("**Terms** (from the book's glossary)")
        parts += [f"- **{t}**: {entries[t]}" for t in sorted(entries, key=str.lower)]
    if keys:
        parts.append("**References**")
        parts += [
            f"- {works[k]['full']}" for k in sorted(keys, key=lambda k: works[k]["cite"].lower())
        ]
    return "\n\n".join(parts) + "\n"


def with_terms_and_references(nb: dict) -> dict:
    """``nb`` (changed in place) with its roles rewritten as text and footnotes and, when it
    has any, the section that lists its terms and references as its last cell."""
    terms: set[str] = set()
    keys: set[str] = set()
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "markdown":
            continue
        src = cell.get("source", "")
        text = rewrite_roles("".join(src) if isinstance(src, list) else src, terms, keys)
        cell["source"] = text.splitlines(keepends=True) if isinstance(src, list) else text
    if terms or keys:
        nb["cells"].append(
            {
                "cell_type": "markdown",
                "id": "terms-and-references",
                "metadata": {"tags": ["terms-and-references"]},
                "source": section(terms, keys).splitlines(keepends=True),
            }
        )
    return nb
