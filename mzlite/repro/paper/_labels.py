"""The paper's cross-references: every ``\\label`` numbered as LaTeX prints it
(``labels.json``), and text that names them ("Table 3") instead of raw labels; see
``mzlite.repro.paper``."""

from __future__ import annotations

import re
from pathlib import Path

from mzlite._io import atomic_write_json

from ._source import DATA_DIR, paper_tex_path, read_paper_tex
from ._tables import _braced, latex_to_text, read_json

LABELS_JSON = DATA_DIR / "labels.json"

# Counters of the paper's preamble: theorem, corollary, proposition and lemma share one counter
# (``\newtheorem{corollary}[theorem]{Corollary}``); definition and remark count on their own.
_THEOREM_NAMES = {
    "theorem": "Theorem", "corollary": "Corollary", "proposition": "Proposition",
    "lemma": "Lemma", "definition": "Definition", "remark": "Remark",
}  # fmt: skip
_NUMBERED_MATH = ("equation", "align", "gather", "multline", "eqnarray")
_FLOATS = {"figure": "Figure", "table": "Table", "algorithm": "Algorithm"}
_TOKEN = re.compile(
    r"\\(?P<sec>section|subsection|subsubsection)(?P<star>\*?)\s*(?:\[[^\]]*\])?\s*\{"
    r"|\\begin\{(?P<begin>[A-Za-z]+\*?)\}"
    r"|\\end\{(?P<end>[A-Za-z]+\*?)\}"
    r"|\\(?P<caption>caption)\s*(?:\[[^\]]*\])?\s*\{"
    r"|\\label\{(?P<label>[^}]*)\}"
    r"|\\(?P<appendix>appendix)\b"
    r"|\\\\(?P<nonumber>)"
)


def _theorem_counters(tex: str) -> dict[str, str]:
    """environment -> the counter it steps, from the ``\\newtheorem`` lines."""
    counters = {env: env for env in _THEOREM_NAMES}
    for m in re.finditer(r"\\newtheorem\{(\w+)\}(?:\[(\w+)\])?\{([^}]*)\}", tex):
        counters[m.group(1)] = m.group(2) or m.group(1)
    return counters


def _short_title(tex_fragment: str, limit: int = 90) -> str:
    """A caption's bold lead or first sentence, as plain text, at most ``limit`` characters."""
    frag = tex_fragment.strip()
    m = re.match(r"\\textbf\{", frag)
    if m:
        frag = _braced(frag, m.end() - 1)[0]
    text = latex_to_text(frag)
    text = re.sub(r"\s*\((?:[^()]|\([^()]*\))*\)", "", text)  # "(R^2, mean+/-std, 5 seeds)"
    # the first sentence: a full stop after a word, not after "vs." or "Eq."
    text = re.split(r"(?<!\bvs)(?<!\bEq)(?<!\be\.g)(?<!\bi\.e)(?<=[A-Za-z0-9)])\.(?:\s|$)",
                    text, maxsplit=1)[0].rstrip(".")  # fmt: skip
    return text if len(text) <= limit else text[: limit - 3].rsplit(" ", 1)[0] + "..."


def parse_labels(tex: str) -> dict[str, dict]:
    """Every ``\\label`` of the paper with the number LaTeX prints for it, found by stepping the
    paper's counters in document order: ``{label: {"kind": "Theorem", "number": "2", "title":
    "Depth separation via TDOF, ...", "text": "Theorem 2"}}``.

    Rules (those of the article class and this paper's preamble): numbered sections count 1, 2,
    ... and after ``\\appendix`` A, B, ... (``\\section*`` does not count; labels under an
    appendix are "Appendix B.3"); theorem-like environments step the counter their
    ``\\newtheorem`` names; each numbered display (equation, align rows without \\nonumber) steps
    the equation counter ("Eq. (5)"); a ``\\caption`` steps its float's counter. A label takes
    the innermost number stepped before it within the enclosing environment, as LaTeX's
    ``\\@currentlabel`` does."""
    body = re.sub(r"(?<!\\)%.*", "", tex)
    start = body.find("\\begin{document}")
    body = body[start if start >= 0 else 0 :]
    theorem_counter = _theorem_counters(tex)
    count: dict[str, int] = {}
    sec = [0, 0, 0]
    appendix = False
    current: dict | None = None
    stack: list[tuple[str, dict | None]] = []
    labels: dict[str, dict] = {}

    def step(name: str) -> int:
        count[name] = count.get(name, 0) + 1
        return count[name]

    for m in _TOKEN.finditer(body):
        if m.group("appendix") is not None:
            appendix, sec = True, [0, 0, 0]
        elif m.group("sec"):
            if m.group("star"):
                continue
            level = ("section", "subsection", "subsubsection").index(m.group("sec"))
            sec[level] += 1
            sec[level + 1 :] = [0] * (2 - level)
            parts = [chr(ord("A") + sec[0] - 1) if appendix else str(sec[0])]
            parts += [str(n) for n in sec[1 : level + 1]]
            title = latex_to_text(_braced(body, m.end() - 1)[0])
            kind = "Appendix" if appendix else "Section"
            current = {"kind": kind, "number": ".".join(parts), "title": title}
        elif m.group("begin"):
            env = m.group("begin")
            stack.append((env, current))
            if env in theorem_counter:
                opt = re.match(r"\s*\[", body[m.end() :])
                title = ""
                if opt:  # [Title~\citep{...}]: up to the matching bracket
                    i, depth = m.end() + opt.end(), 1
                    j = i
                    while j < len(body) and depth:
                        depth += {"[": 1, "]": -1}.get(body[j], 0)
                        j += 1
                    title = latex_to_text(re.sub(r"~?\\cite[tp]?\{[^}]*\}", "", body[i : j - 1]))
                n = step(theorem_counter[env])
                current = {"kind": _THEOREM_NAMES.get(env, env.title()), "number": str(n),
                           "title": title}  # fmt: skip
            elif env in _NUMBERED_MATH:
                current = {"kind": "Eq.", "number": f"({step('equation')})", "title": ""}
        elif m.group("end"):
            env = m.group("end")
            while stack:
                top, saved = stack.pop()
                if top == env:
                    current = saved
                    break
        elif m.group("caption"):
            float_env = next((e for e, _ in reversed(stack) if e.rstrip("*") in _FLOATS), None)
            if float_env is None:
                continue
            kind = _FLOATS[float_env.rstrip("*")]
            title = _short_title(_braced(body, m.end() - 1)[0])
            current = {"kind": kind, "number": str(step(kind)), "title": title}
        elif m.group("nonumber") is not None:
            # a new row of a numbered multi-line display: the next row gets the next number
            env = next((e for e, _ in reversed(stack) if e in _NUMBERED_MATH), None)
            if env is not None and env != "equation":
                row_end = body.find("\\\\", m.end())
                row = body[m.end() : row_end if row_end >= 0 else None]
                if not re.search(r"\\(?:nonumber|notag)\b", row):
                    current = {"kind": "Eq.", "number": f"({step('equation')})", "title": ""}
        elif m.group("label"):
            label = m.group("label")
            if current is None:
                raise ValueError(f"label {label!r} comes before any numbered element")
            entry = dict(current)
            entry["text"] = f"{entry['kind']} {entry['number']}"
            labels[label] = entry
    for entry in labels.values():  # "Proof of Theorem thm:tdof-depth" -> "... Theorem 2 ..."
        entry["title"] = _NAMED_LABEL.sub(
            lambda m: labels[m.group(1)]["text"] if m.group(1) in labels else m.group(0),
            entry["title"],
        )
    return labels


def write_paper_labels(tex_path=None, out_path=None) -> Path:
    """Write ``data/paper/labels.json`` (every label's printed number and title) atomically."""
    labels = parse_labels(read_paper_tex(tex_path))
    doc = {"source": Path(tex_path or paper_tex_path()).name, "labels": labels}
    return atomic_write_json(Path(out_path or LABELS_JSON), doc, ensure_ascii=False)


def paper_label(label: str, path=None) -> dict:
    """``{"kind", "number", "title", "text"}`` of one of the paper's labels (``KeyError`` naming
    the known labels of that kind when it does not exist)."""
    labels = read_json(str(path or LABELS_JSON))["labels"]
    if label not in labels:
        prefix = label.split(":", 1)[0] + ":"
        near = sorted(k for k in labels if k.startswith(prefix))
        raise KeyError(f"the paper has no label {label!r}; labels {prefix}... are {near}")
    return dict(labels[label])


def paper_ref(label: str, title: bool = False, path=None) -> str:
    """How a reader of the paper names ``label``: ``paper_ref("thm:tdof-depth")`` -> "Theorem 2",
    ``paper_ref("thm:tdof-depth", title=True)`` -> "Theorem 2 (Depth separation via TDOF, ...)";
    sections read "Section 4.2", appendices "Appendix B.3", equations "Eq. (5)"."""
    entry = paper_label(label, path)
    if title and entry["title"]:
        return f"{entry['text']} ({entry['title']})"
    return entry["text"]


# A raw label as it appears in text: "tab:meb", "thm:tdof-depth" (not URLs such as "http:").
RAW_LABEL = re.compile(r"(?<![\w/.-])(?:thm|tab|eq|prop|fig|sec|app|lem|cor|def|rem|alg):[\w-]+")


_KIND_WORDS = (
    r"(?:Theorem|Thm\.|Table|Tab\.|Eq\.|Eqs\.|Equation|Proposition|Prop\.|Figure|Fig\.|"
    r"Section|Sec\.|Appendix|App\.|Lemma|Corollary|Definition|Remark)"
)
_NAMED_LABEL = re.compile(rf"(?:\b{_KIND_WORDS}\s+)?({RAW_LABEL.pattern})")


def name_labels(text: str, path=None) -> str:
    """``text`` with every raw paper label replaced by its printed name: "see tab:meb" and "see
    Table tab:meb" both become "see Table 3"."""
    return _NAMED_LABEL.sub(lambda m: paper_ref(m.group(1), path=path), text)
