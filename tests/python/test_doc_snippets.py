"""Every Python snippet of README.md and docs/*.md runs as written: as a tuttirun job of the size
its first line names ("tuttirun -np N"; 2 if it names none), or under Debian's OpenMPI when it
names "mpirun -np N" (MPI mode), exiting 0 on every rank."""
import glob
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT, launcher_env, run_job

SNIPPET = re.compile(r"^```python\n(.*?)^```", re.M | re.S)
RANKS = re.compile(r"tuttirun -np (\d+)")
MPI_RANKS = re.compile(r"mpirun -np (\d+)")


def snippets():
    found = []
    for path in [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs",
                                                                                   "*.md"))):
        with open(path) as f:
            text = f.read()
        for n, match in enumerate(SNIPPET.finditer(text)):
            line = text[:match.start()].count("\n") + 2
            found.append(pytest.param(match.group(1),
                                      id=f"{os.path.relpath(path, ROOT)}:{line}"))
    return found


def test_the_readme_has_its_quick_start_snippet():
    assert any("import tutti.torch as hvd" in p.values[0] for p in snippets())


@pytest.mark.parametrize("code", snippets())
def test_snippet_runs(code, tmp_path):
    first = code.splitlines()[0] if code else ""
    script = tmp_path / "snippet.py"
    script.write_text(code)
    if MPI_RANKS.search(first):
        from test_mpi_mode import MPIRUN, need_mpi
        need_mpi()
        result = subprocess.run([MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np",
                                 MPI_RANKS.search(first).group(1), sys.executable, str(script)],
                                env=launcher_env(), capture_output=True, text=True, timeout=240)
        assert result.returncode == 0, result.stdout + result.stderr
        return
    ranks = int(RANKS.search(first).group(1)) if RANKS.search(first) else 2
    result = run_job(ranks, str(script))
    assert result.returncode == 0, result.stdout + result.stderr
