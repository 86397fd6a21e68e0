"""Where mzlite finds ``data/``: the checkout's, else the unzipped student download's."""

import subprocess
import sys
from pathlib import Path

import pytest

from mzlite import _paths

ROOT = Path(__file__).resolve().parents[1]


def test_a_checkout_reads_its_own_data_whatever_the_working_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("MZLITE_DATA", raising=False)
    monkeypatch.chdir(tmp_path)
    assert _paths.in_checkout() and _paths.data_root() == ROOT / "data"
    monkeypatch.setenv("MZLITE_DATA", str(tmp_path))
    assert _paths.data_root() == tmp_path


@pytest.mark.slow
def test_an_installed_package_reads_the_data_beside_the_chapters(tmp_path):
    """A copy of the package with no checkout around it, started in a subfolder of an unzipped
    download, finds the download's data/ (results and the paper's numbers) and nothing else."""
    import shutil

    site = tmp_path / "site"
    shutil.copytree(ROOT / "mzlite", site / "mzlite", ignore=shutil.ignore_patterns("__pycache__"))
    download = tmp_path / "download"
    (download / "data" / "paper").mkdir(parents=True)
    (download / "notes").mkdir()
    probe = (
        "import mzlite._paths as p, mzlite.repro.experiments.specs as s, "
        "mzlite.repro.paper as q;"
        "print(p.in_checkout(), p.data_root(), s.default_results_dir(), q.DATA_DIR)"
    )
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=download / "notes", env=env,
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    data = download / "data"
    assert out == ["False", str(data), str(data / "results"), str(data / "paper")]
