"""Run every cell of the analyst notebook on a crawl root and keep its outputs.

``python tools/execute_notebook.py [ROOT] [--out FILE]``: ROOT defaults to ``.crawl/demo``
(`crawl demo`), FILE to the notebook itself, so the committed notebook shows its tables and
plots where the repository is browsed. The kernel is this interpreter (a kernelspec written to
a temporary folder: no Jupyter setup needed), which starts its own SparkSession;
``tests/e2e/test_notebook.py`` runs the notebook the same way on the test crawl. Needs the
``notebook`` extra.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
NOTEBOOK = REPO / "notebooks" / "crawl_overview.ipynb"
KERNEL = "crawllib-notebook"
CELL_TIMEOUT = 300


def execute(root: str, notebook: Path = NOTEBOOK, timeout: int = CELL_TIMEOUT) -> Any:
    """The notebook (an nbformat node) after running every cell with CRAWL_ROOT=root."""
    import nbformat
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager
    from nbclient import NotebookClient

    with tempfile.TemporaryDirectory() as kernels:
        # What `python -m ipykernel install` writes, pointing at this interpreter.
        (Path(kernels) / KERNEL).mkdir()
        spec = {
            "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "crawllib",
            "language": "python",
        }
        (Path(kernels) / KERNEL / "kernel.json").write_text(json.dumps(spec))
        km = AsyncKernelManager(
            kernel_name=KERNEL, kernel_spec_manager=KernelSpecManager(kernel_dirs=[kernels])
        )
        env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}  # inline plots
        env["CRAWL_ROOT"] = root
        nb = nbformat.read(notebook, as_version=4)
        client = NotebookClient(
            nb,
            km=km,
            timeout=timeout,
            startup_timeout=120,
            resources={"metadata": {"path": str(notebook.parent)}},  # Jupyter's cwd
        )
        client.execute(env=env)
    return nb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", default=str(REPO / ".crawl" / "demo"))
    parser.add_argument("--out", type=Path, default=NOTEBOOK, help="default: the notebook")
    args = parser.parse_args()
    import nbformat

    nb = execute(args.root)
    for cell in nb.cells:  # no per-run noise in the committed file: timings, the JVM's log
        cell.get("metadata", {}).pop("execution", None)
        if "outputs" in cell:
            cell["outputs"] = [o for o in cell["outputs"] if o.get("name") != "stderr"]
    nbformat.write(nb, args.out)
    print(f"wrote {args.out} ({sum(len(c.get('outputs', [])) for c in nb.cells)} outputs)")


if __name__ == "__main__":
    main()
