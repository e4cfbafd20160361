"""The notebooks execute headless through nbclient on the installed "Python 3 (gpureplace)"
kernel; on a machine without a GPU their compile, reflection and invalidation cells still run
and assert."""

import os

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _kernel_installed():
    from jupyter_client.kernelspec import KernelSpecManager
    return "gpureplace" in KernelSpecManager().find_kernel_specs()


@pytest.mark.parametrize("name", ["quickstart", "redefinition", "dask"])
def test_notebook_executes(name, tmp_path, own_disk_cache):   # (they count compiles)
    if not _kernel_installed():
        pytest.skip("the gpureplace kernelspec is not installed (pip install the package)")
    path = os.path.join(HERE, "notebooks", f"{name}.ipynb")
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="gpureplace",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()           # raises on the first cell that fails
    cells = [c for c in nb.cells if c.cell_type == "code"]
    assert not [o for c in cells for o in c.get("outputs", []) if o.output_type == "error"]
    outputs = "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", ""))
                      for c in cells for o in c.get("outputs", []))
    if name == "quickstart":
        launch_cell = [c for c in cells if c.source.startswith("flags = ")][0]
        printed = "".join(o.get("text", "") for o in launch_cell.get("outputs", []))
        assert "hello from thread 0" in printed and "hello from thread 1" in printed
        assert "saxpy matches NumPy" in outputs             # on the GPU, or the simulator
        assert "recompiled with the new scale" in outputs
        assert "scale redefined" in outputs and "saxpy will recompile" in outputs
        assert ".entry saxpy" in outputs
        assert "16-byte loads and stores: 3" in outputs
    elif name == "dask":
        assert "matches NumPy" in outputs
        assert "the workers ran the new offset; recompiled: shifted" in outputs
    else:
        assert "refused:" in outputs and "fixed: recompiled" in outputs
        # helper is typed in the second code cell (In[2]), line 6 counting the %%cuda line
        assert "in helper (Cell In[2], line 6)" in outputs


def test_a_failing_cuda_cell_stops_the_notebook(tmp_path):
    """Run All stops at a %%cuda cell that raises, as at any cell, and shows the user's code."""
    if not _kernel_installed():
        pytest.skip("the gpureplace kernelspec is not installed (pip install the package)")
    import re

    from nbformat.v4 import new_code_cell, new_notebook
    nb = new_notebook(cells=[new_code_cell(src) for src in (
        "import numpy as np",
        "%%cuda\ndef helper(v):\n    return v + 1.0\nraise ValueError('boom in a cuda cell')\n"
        "def never(v):\n    return v\n",
        "reached = True",
    )])
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="gpureplace",
                                     resources={"metadata": {"path": str(tmp_path)}})
    with pytest.raises(nbclient.exceptions.CellExecutionError, match="boom in a cuda cell"):
        client.execute()
    failed, after = nb.cells[1], nb.cells[2]
    assert failed.execution_count == 2 and after.execution_count is None and not after.outputs
    errors = [o for o in failed.outputs if o.output_type == "error"]
    assert len(errors) == 1 and errors[0].ename == "ValueError"
    shown = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(errors[0].traceback))
    assert "Cell In[2], line 4" in shown and "raise ValueError('boom in a cuda cell')" in shown
    assert "run_cell_magic" not in shown and "gpureplace" not in shown
