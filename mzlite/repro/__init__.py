"""The reproduction layer: the paper's tables as data and what runs and reads them
(:mod:`~mzlite.repro.experiments`, cluster launchers included:
:mod:`~mzlite.repro.experiments.launchers`), the paper's own numbers (:mod:`~mzlite.repro.paper`),
results as the book's HTML (:mod:`~mzlite.repro.render`), the real-data study
(:mod:`~mzlite.repro.transfer`), and the result logic of chapters 4 and 5
(:mod:`~mzlite.repro.training_study`, :mod:`~mzlite.repro.meb_study`).

It sits above the teaching library (zonotope, nn, tasks, train, analysis, viz, reachability,
exercises) and imports from it; the teaching library never imports from here (the import
contract in ``pyproject.toml``, checked by ``make lint``)."""
