"""Issue 39: what cannot be handed to scipy is refused before any
contribution is read, with the library's words."""
import numpy as np
import pytest

import coo_assembler as ca


class Exploding:
    """Coordinates that fail the test if anything reads them."""

    def __array__(self, *a, **k):
        raise AssertionError("a contribution was read")


def test_a_rank_3_csr_is_refused_before_reading_naming_coo():
    for layout in ("csr", "csc"):
        with pytest.raises(ca.CooAssemblerError, match="rank 3: use the coo layout"):
            ca.assemble(np.ones(1), (Exploding(), Exploding(), Exploding()), (2, 2, 2), layout=layout)
    # The default layout is csr: the same.
    with pytest.raises(ca.CooAssemblerError, match="use the coo layout"):
        ca.assemble(np.ones(1), (Exploding(), Exploding(), Exploding()), (2, 2, 2))
    # coo takes it.
    t = ca.assemble(np.ones(2), (np.array([0, 0]), np.array([1, 1]), np.array([1, 1])), (2, 2, 2), layout="coo")
    assert t.nnz == 1


def test_extents_of_2_pow_63_are_refused_before_reading():
    big = 1 << 63
    with pytest.raises(ca.CooAssemblerError, match="2\\^63 or more.*into a file"):
        ca.assemble(np.ones(1), (Exploding(), Exploding()), (big, 3))
    with pytest.raises(ca.CooAssemblerError, match="2\\^63 or more"):
        ca.assemble(np.ones(1), (Exploding(), Exploding()), (3, big + 5), layout="coo")
    # Below 2^63 is fine.
    a = ca.assemble(np.ones(1), (np.array([0]), np.array([(1 << 62)])), (1, (1 << 62) + 1), layout="coo")
    assert a.nnz == 1
