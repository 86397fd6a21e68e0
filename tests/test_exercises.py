import pytest

from mzlite import exercises
from mzlite.exercises import check, exercise


@exercise("test.double", hint="twice three")
def _double(answer):
    return answer == 6, "2 * 3 = 6"


def test_unanswered_is_reported_not_failed():
    r = check("test.double", ...)
    assert r.status == "unanswered" and not r and "twice three" in r.message
    assert check("test.double", None).status == "unanswered"


def test_right_and_wrong_answers():
    assert check("test.double", 6).status == "correct"
    wrong = check("test.double", 5)
    assert wrong.status == "wrong" and "Hint" in wrong.message
    assert "Not yet" in wrong._repr_html_()


def test_strict_raises_on_a_wrong_solution():
    check("test.double", 6, strict=True)
    with pytest.raises(AssertionError, match="test.double"):
        check("test.double", 7, strict=True)


def test_a_malformed_answer_is_a_wrong_answer():
    @exercise("test.len")
    def _len(answer):
        return len(answer) == 2, "two items"

    r = check("test.len", 3)
    assert r.status == "wrong" and "TypeError" in r.message


def test_unknown_key_and_duplicate_registration():
    with pytest.raises(KeyError, match="unknown exercise"):
        check("nope.nothing", 1)
    with pytest.raises(ValueError, match="registered twice"):
        exercise("test.double")(lambda a: (True, ""))


def test_chapter_exercises_are_discovered():
    # Chapter modules register themselves on first use of the registry.
    assert all(k.count(".") >= 1 for k in exercises.keys())
