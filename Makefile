# The two commands of the README:
#   make book   builds the executed book into book/_build/html (the main job)
#   make test-fast  the unit tier only (no slow, integration or browser tests), for the edit loop
#   make test   unit tests, every notebook under papermill, the book with warnings as errors,
#               the student copies run whole from the unzipped download, and the rendered
#               chapters checked in headless Chromium
#   make student  student copies of the chapters (no solutions) in book/_build/student, zipped
#   make book STUDENT=1  the student edition: no solution cells, no answers' outputs
#   make instructor  the instructor pack (solutions, sample answers) in book/_build/instructor
#   make lab      JupyterLab (with jupyterlab-myst) on the student copies: the chapters as a
#                 student works them, solutions out (notebooks/ are the sources, with solutions)
# Both create (or reuse) .venv; nothing else on the machine is touched, except that `make test`
# installs Debian's chromium when it is missing and apt-get can be used.

PYTHON ?= python3
VENV   := .venv
VPY    := $(VENV)/bin/python
STAMP  := $(VENV)/.mzlite-installed
# The PyTorch the book was built with; the package itself asks for torch>=2.4. From PyPI on Linux
# x86-64 this is the multi-GB CUDA build: TORCH_INDEX=https://download.pytorch.org/whl/cpu (pip's
# --index-url) or TORCH_EXTRA_INDEX (--extra-index-url) picks PyTorch's own index for this one
# install. Both empty: pip's own configuration, as before.
TORCH  ?= torch==2.13.0
# Seconds a test may take before pytest-timeout fails it (tests that need longer say so)
TEST_TIMEOUT ?= 300
TORCH_INDEX ?=
TORCH_EXTRA_INDEX ?=
TORCH_PIP_INDEX := $(if $(TORCH_INDEX),--index-url "$(TORCH_INDEX)") $(if $(TORCH_EXTRA_INDEX),--extra-index-url "$(TORCH_EXTRA_INDEX)")

.PHONY: venv book notebooks student student-run instructor assets test test-unit test-integration \
	test-browser test-fast browser lint clean lab test-lab test-grading \
	test-integration-rest

venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --disable-pip-version-check $(TORCH_PIP_INDEX) "$(TORCH)"
	$(VPY) -m pip install --quiet --disable-pip-version-check -e ".[book,dev,ray,search]"
	@touch $@

assets:
	@bash book/_scripts/fetch_browser_assets.sh

notebooks: $(STAMP)
	$(VPY) book/_scripts/execute_notebooks.py

# Student copies of the chapters (no solutions, no outputs) in book/_build/student, zipped for the book
student: $(STAMP)
	$(VPY) book/_scripts/make_student.py

# The chapters as a student works them: the student copies (no solutions; terms and citations as
# footnotes) opened in this environment's JupyterLab, which has jupyterlab-myst (pyproject's lab
# extra). They read data/ from this checkout.
lab: student
	$(VENV)/bin/jupyter lab book/_build/student

# The student's JupyterLab as a client: the download's install lines in a fresh venv from the
# wheel, JupyterLab headless, chapter 1 opened, run and read in Chromium (tests/test_student_lab.py)
test-lab: $(STAMP)
	@bash book/_scripts/ensure_chromium.sh
	$(TIMED) lab $(PYTEST_CI) -m browser tests/test_student_lab.py

# The instructor pack (chapters with solutions, sample answers): never part of the student download
instructor: $(STAMP)
	$(VPY) book/_scripts/make_student.py --instructor book/_build/instructor

# STUDENT=1: the student edition (book/_build/student-book/_build/html), built from the executed
# chapters without their solution cells and without the answer cells' outputs
STUDENT ?=
book: $(STAMP) assets notebooks student
	$(VPY) book/_scripts/teaching.py
ifeq ($(STUDENT),1)
	$(VPY) book/_scripts/make_student.py --book-source book/_build/student-src
	$(VENV)/bin/jupyter-book build book/_build/student-src -W -n --keep-going --path-output book/_build/student-book
	@echo
	@echo "The student edition is built: book/_build/student-book/_build/html/index.html."
else
	$(VENV)/bin/jupyter-book build book -W -n --keep-going
	@echo
	@echo "The book is built: open book/_build/html/index.html in a browser (it works offline)."
endif

browser: $(STAMP)
	@bash book/_scripts/ensure_chromium.sh
	$(VPY) -m pytest -q -m browser tests/test_browser.py tests/test_one_number.py

# The student copies run whole from the unzipped download: a second execution of every chapter,
# independent of the book's (its own unzipped folder, data and results). Its copies go to their
# own folder, so that it can run beside `make book`, which writes book/_build/student.
student-run: $(STAMP)
	$(TIMED) student-run $(VPY) book/_scripts/make_student.py --execute --out book/_build/student-run

# The lanes of `make test`, each one process at a time (one torch thread in the tests and in
# every chapter's kernel): the unit tests; the integration tests in two lanes, the graded classes
# and the jail (test-grading) and the rest (Ray, killed runs, the download: test-integration-rest);
# the book (every chapter executed, then built) and its browser checks; the student copies run
# whole; the student's JupyterLab (test-lab). `make test-integration` runs both integration lanes.
PYTEST_CI := $(VPY) -m pytest -q --durations=25 --timeout=$(TEST_TIMEOUT)
GRADING_TESTS := tests/test_grading.py tests/test_grading_honest.py tests/test_sandbox.py
TIMED := bash .ci/timed
test-integration: test-grading test-integration-rest

test-grading: $(STAMP)
	@bash book/_scripts/ensure_bubblewrap.sh
	$(TIMED) grading $(PYTEST_CI) -m "integration and not browser" $(GRADING_TESTS)

test-integration-rest: $(STAMP)
	$(TIMED) integration-rest $(PYTEST_CI) -m "integration and not browser" \
		$(addprefix --deselect ,$(GRADING_TESTS))

test-unit: $(STAMP)
	$(TIMED) unit $(PYTEST_CI) -m "not integration and not browser"

test-browser: $(STAMP)
	$(TIMED) book $(MAKE) --no-print-directory book
	$(TIMED) browser $(MAKE) --no-print-directory browser

# The lanes run two at a time (-j2), the longest first (make starts the next one in this order
# as a lane ends); each lane prints its time ("lane NAME: N s"), so CI's log says where the
# minutes go. Target: 25 min on 2 idle cores from a fresh clone, install included.
test: $(STAMP)
	$(MAKE) --no-print-directory lint
	@bash book/_scripts/ensure_chromium.sh  # once, before two lanes need it at the same time
	@bash book/_scripts/ensure_bubblewrap.sh  # the grader's jail, likewise
	$(MAKE) --no-print-directory -j2 --output-sync=line \
		test-browser test-grading student-run test-unit test-integration-rest test-lab
	@echo "All checks passed."

# The unit tier for the edit loop (no slow, integration or browser tests): 1,212 tests, about
# 5 min on 2 cores (CI's unit lane, these and the 5 slow ones, took 325 s beside another lane);
# the same in CONTRIBUTING and the README.
test-fast: $(STAMP)
	$(VPY) -m pytest -q -m "not slow and not integration and not browser" --timeout=$(TEST_TIMEOUT)

lint: $(STAMP)
	$(VENV)/bin/ruff check mzlite tests benchmarks book/_scripts tools
	$(VENV)/bin/ruff format --check mzlite tests benchmarks book/_scripts tools
	$(VENV)/bin/lint-imports  # the layers of pyproject.toml's [tool.importlinter]

clean:
	rm -rf book/_build book/chapters book/_generated
