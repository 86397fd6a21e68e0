"""The grader of submitted notebooks: it executes each submission in a sandbox
(:mod:`~mzlite.grading.sandbox`), reads what the student's ``check`` calls recorded
(:mod:`~mzlite.grading.submission`), judges the answers in a process of its own
(:mod:`~mzlite.grading.judge`, with student functions in :mod:`~mzlite.grading.worker`) and writes
the gradebook (:mod:`~mzlite.grading.gradebook`). ``python -m mzlite grade`` is
:func:`mzlite.grading.grader.main`.

It sits above the teaching library (the exercise checkers it judges with) and beside the
reproduction layer; neither imports the other, and the teaching library imports neither."""
