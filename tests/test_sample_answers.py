"""The Teaching page's discussion questions and their sample answers (issue 37): every question has
a label, every label a sample answer in ``book/instructor/sample_answers.md``, which goes into the
instructor pack and into nothing a student gets. Questions and answers are matched by label
(``discuss-ch3``), never by their sentences, so either side can be reworded."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import pytest
from book_scripts import load

ROOT = Path(__file__).resolve().parents[1]
TEACHING = ROOT / "book" / "teaching.md"
SAMPLES = ROOT / "book" / "instructor" / "sample_answers.md"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
LABEL = re.compile(r"(?m)^\((discuss-[\w-]+)\)=\s*$")
ms = load("make_student")


def discussion_questions(page: str) -> dict[str, str]:
    """``{label: question}`` of the page's "Discussion questions" section; a question without a
    label directly above it raises, naming its first words."""
    section = page.split("## Discussion questions", 1)[1].split("\n## ", 1)[0]
    questions: dict[str, str] = {}
    label = None
    for block in re.split(r"\n\s*\n", section):
        block = block.strip()
        if m := LABEL.fullmatch(block.splitlines()[0] if block else ""):
            label, block = m[1], "\n".join(block.splitlines()[1:]).strip()
        if not block.startswith("**Chapter"):
            continue  # the section's introduction
        if label is None:
            raise ValueError(f"a discussion question has no (discuss-...)= label: {block[:50]!r}")
        if label in questions:
            raise ValueError(f"label {label} is used twice")
        questions[label], label = block, None
    return questions


def sample_answers(text: str) -> dict[str, str]:
    """``{label: answer}``: the text after each ``(discuss-...)=`` line up to the next label or
    second-level heading."""
    parts = LABEL.split(text)
    answers = {}
    for label, body in zip(parts[1::2], parts[2::2], strict=True):
        answers[label] = body.split("\n## ", 1)[0].strip()
    return answers


def test_every_discussion_question_has_a_sample_answer():
    questions = discussion_questions(TEACHING.read_text())
    answers = sample_answers(SAMPLES.read_text())
    # one question per chapter, labelled by its chapter (the issue counted 11)
    chapters = {int(p.name[:2]) for p in NOTEBOOKS}
    assert {int(k.removeprefix("discuss-ch")) for k in questions} == chapters
    for label, question in questions.items():
        assert question.startswith(f"**Chapter {label.removeprefix('discuss-ch')}.**"), label
    missing = sorted(set(questions) - set(answers))
    assert not missing, f"discussion questions without a sample answer: {missing}"
    assert not set(answers) - set(questions), "a sample answer whose question is gone"
    for label, answer in answers.items():
        assert answer.startswith("### "), f"{label}: the answer starts with a heading"
        assert len(answer.split()) >= 80, f"{label}: a sample answer of a few words"
        assert "good answer" in answer.lower(), f"{label}: say what a good answer mentions"
        # results are named where they live, never typed: no decimals, no percentages
        typed = re.findall(r"(?<![\w.$^])\d+\.\d+|\d+\s?%", answer)
        assert not typed, f"{label}: a typed result number {typed}"


def test_labels_are_required_and_unique():
    page = TEACHING.read_text()
    unlabelled = re.sub(r"(?m)^\(discuss-ch3\)=\n", "", page, count=1)
    with pytest.raises(ValueError, match="no \\(discuss-...\\)= label"):
        discussion_questions(unlabelled)
    doubled = page.replace("(discuss-ch4)=", "(discuss-ch3)=", 1)
    with pytest.raises(ValueError, match="used twice"):
        discussion_questions(doubled)


def _answer_sentences() -> list[str]:
    """A long sentence of every sample answer: what must never reach a student."""
    out = []
    for label, answer in sample_answers(SAMPLES.read_text()).items():
        body = answer.split("\n", 1)[1].replace("\n", " ")
        sentence = max(re.split(r"(?<=[.:;])\s", body), key=len)
        assert len(sentence) > 60, label
        out.append(sentence[:60])
    return out


def test_the_instructor_pack_has_the_sample_answers_and_no_student_copy_does(tmp_path):
    pack = ms.main(["--instructor", str(tmp_path / "pack")])
    assert pack == 0
    with zipfile.ZipFile(tmp_path / "pack" / "mzattn-instructor-pack.zip") as z:
        text = z.read("mzattn-instructor-pack/sample_answers.md").decode()
    assert set(sample_answers(text)) == set(discussion_questions(TEACHING.read_text()))

    sentences = _answer_sentences()
    # the student download: every chapter's copy and the files shipped beside them
    files = ms.make(NOTEBOOKS, tmp_path / "copies", seed=None)
    ms.make_zip(files, tmp_path / "download.zip")
    shipped = []
    with zipfile.ZipFile(tmp_path / "download.zip") as z:
        for name in z.namelist():
            if name.endswith(".ipynb"):
                cells = json.loads(z.read(name))["cells"]
                shipped += ["".join(c["source"]) for c in cells]
            elif not name.endswith(".pt"):
                shipped.append(z.read(name).decode(errors="replace"))
    # the student edition of the book: its pages, the Teaching page's questions included
    executed = tmp_path / "chapters"
    executed.mkdir()
    (executed / NOTEBOOKS[0].name).write_text(NOTEBOOKS[0].read_text())
    edition = ms.make_book_source(tmp_path / "student-book", executed)
    pages = [p.read_text() for p in edition.rglob("*.md")]
    pages += ["".join(c["source"]) for p in edition.rglob("*.ipynb")
              for c in json.loads(p.read_text())["cells"]]  # fmt: skip
    assert any("(discuss-ch1)=" in page for page in pages)  # the questions are there ...
    for where in (shipped, pages):
        flat = re.sub(r"\s+", " ", " ".join(where))
        leaked = [s for s in sentences if s in flat]
        assert not leaked, f"a sample answer reached a student: {leaked[:1]}"  # ... not answers
