"""The reproduction layer: the paper's tables as data and what runs and reads them
(:mod:`~mzlite.repro.experiments`), the paper's own numbers (:mod:`~mzlite.repro.paper`), results
as the book's HTML (:mod:`~mzlite.repro.render`), cluster launchers
(:mod:`~mzlite.repro.launchers`), the real-data study (:mod:`~mzlite.repro.transfer`), and the
result logic of chapters 4 and 5 (:mod:`~mzlite.repro.training_study`,
:mod:`~mzlite.repro.meb_study`).

It sits above the teaching library (zonotope, nn, tasks, train, analysis, viz, reachability,
exercises) and imports from it; the teaching library never imports from here (the import
contract in ``pyproject.toml``, checked by ``make lint``)."""
