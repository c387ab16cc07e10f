import numpy as np
import pytest


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


def fe_problem(rng, n_nodes=500, n_el=2000, k=8):
    """Random 'elements': k distinct dofs each, symmetric element matrices."""
    dofs = np.stack([rng.choice(n_nodes, size=k, replace=False) for _ in range(n_el)])
    a = rng.standard_normal((n_el, k, k))
    ke = a + a.transpose(0, 2, 1)
    return dofs, ke


def expand(dofs, ke):
    """(rows, cols, values) of element matrices, ke[e, a, b] at (dofs[e, a], dofs[e, b])."""
    n_el, k = dofs.shape
    rows = np.repeat(dofs, k, axis=1).ravel()
    cols = np.tile(dofs, (1, k)).ravel()
    return rows, cols, ke.reshape(n_el, k * k).ravel()
