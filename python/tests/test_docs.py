"""The Python blocks of docs/python.md run as written, in order, in one namespace."""

import os
import re

import pytest

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "python.md")


def test_doc_examples_run(tmp_path, monkeypatch):
    pytest.importorskip("skfem")
    with open(DOC) as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), flags=re.S)
    assert len(blocks) >= 5
    monkeypatch.chdir(tmp_path)
    ns: dict = {}
    for i, code in enumerate(blocks):
        if code.lstrip().startswith("b.push_elements(dofs, ke)"):
            continue  # a signature line, not a program
        exec(compile(code, f"docs/python.md block {i}", "exec"), ns)
    assert ns["f"].shape == (9261, 9261)
