"""The reproduction layer: the paper's tables as data and what runs and reads them
(:mod:`~mzlite.repro.experiments`), the paper's own numbers (:mod:`~mzlite.repro.paper`), the
book's HTML (:mod:`~mzlite.repro.render`) and one module per results chapter. It imports from the
teaching library, which never imports from here (``make lint`` checks the contract)."""
