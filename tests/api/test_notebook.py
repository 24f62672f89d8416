"""docs/python_api.ipynb runs from top to bottom in a fresh python3 kernel, and its
activations of two sentences equal Hugging Face's hidden states (checked in the notebook)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[2] / "docs" / "python_api.ipynb"


def test_notebook_is_committed_without_outputs():
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    assert code and all(not c["outputs"] and c["execution_count"] is None for c in code)


def test_notebook_runs(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},  # the run folder goes under tmp_path
    )
    client.execute()  # raises CellExecutionError when a cell fails
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    html = [o for o in outputs if "text/html" in o.get("data", {})]
    assert any("plotly-graph-div" in o["data"]["text/html"] for o in html)  # the result's repr
    assert (tmp_path / "runs" / "python-api-demo" / "metrics.json").exists()
    printed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "equal to Hugging Face's hidden states" in printed  # geomlens.activations vs HF
