"""Distributed assembly from Python: each case runs worker.py under
``mpirun`` on 1 to 4 ranks (oversubscribed on small machines) and every
rank must report OK. Skipped when mpirun or mpi4py is missing."""

import os
import re
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("mpi4py")
pytest.importorskip("coo_assembler_mpi")
MPIRUN = shutil.which("mpirun")
WORKER = os.path.join(os.path.dirname(__file__), "worker.py")


@pytest.mark.skipif(MPIRUN is None, reason="mpirun is not on the PATH (openmpi-bin)")
@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
@pytest.mark.parametrize("case", ["memory", "files", "abandon"])
def test_distributed(case, ranks, tmp_path):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    r = subprocess.run(
        [MPIRUN, "-n", str(ranks), "--oversubscribe", "--timeout", "300", sys.executable, WORKER, case, str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
    )
    # mpirun may interleave the ranks' lines: find each rank's mark.
    oks = set(re.findall(rf"worker {case} rank (\d+) OK", r.stdout))
    assert r.returncode == 0 and len(oks) == ranks, r.stdout + r.stderr
