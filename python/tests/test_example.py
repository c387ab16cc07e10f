"""Smoke test of the scikit-fem example at a small size."""

import os
import sys

import pytest

pytest.importorskip("skfem")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import skfem_poisson  # noqa: E402


@pytest.mark.parametrize("args", [["--n", "5"], ["--n", "3", "--elasticity"]])
def test_skfem_example_matches_asm(args, capsys):
    assert skfem_poisson.main(args) == 0
    out = capsys.readouterr().out
    assert "equal to rounding" in out
