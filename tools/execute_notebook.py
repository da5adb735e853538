"""Run every cell of the analyst notebook on a crawl root and keep its outputs.

``python tools/execute_notebook.py [ROOT] [-p NAME VALUE ...] [--out FILE]``: ROOT defaults to
``.crawl/demo`` (`crawl demo`), FILE to the notebook itself, so the committed notebook shows its
tables and plots where the repository is browsed. The parameters (ROOT is ``CRAWL_ROOT``; the
notebook's first cell lists the others: ``ENGINE``, ``CONFIG``, ``SETTINGS``, ``TOP_N``) go in a
cell after the one tagged ``parameters``, as papermill injects them; a VALUE is read as
Python (JSON) when it parses, else as text. The kernel is this interpreter (a kernelspec
written to a temporary folder: no Jupyter setup needed); ``tests/e2e/test_notebook.py`` runs
the notebook the same way on the test crawl. The outputs kept hold no path of this machine:
the repository's folder and the home folder are written ``.`` and ``~``. Needs the
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


def inject(nb: Any, parameters: dict[str, Any]) -> None:
    """Put ``parameters`` in a cell tagged ``injected-parameters`` after the cell tagged
    ``parameters``, as papermill does (replacing one injected before)."""
    import nbformat

    cells = [c for c in nb.cells if "injected-parameters" not in c.metadata.get("tags", [])]
    at = next(i for i, c in enumerate(cells) if "parameters" in c.metadata.get("tags", []))
    source = "# Parameters\n" + "".join(f"{k} = {v!r}\n" for k, v in parameters.items())
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["tags"] = ["injected-parameters"]
    nb.cells = [*cells[: at + 1], cell, *cells[at + 1 :]]


def execute(
    root: str,
    notebook: Path = NOTEBOOK,
    timeout: int = CELL_TIMEOUT,
    parameters: dict[str, Any] | None = None,
) -> Any:
    """The notebook (an nbformat node) after running every cell with CRAWL_ROOT=root and the
    other ``parameters`` injected."""
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
        inject(nb, {"CRAWL_ROOT": root, **(parameters or {})})
        client = NotebookClient(
            nb,
            km=km,
            timeout=timeout,
            startup_timeout=120,
            resources={"metadata": {"path": str(notebook.parent)}},  # Jupyter's cwd
        )
        client.execute(env=env)
    return nb


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def scrub(nb: Any) -> None:
    """No per-run noise and no path of this machine in the outputs: timings and stderr (the
    JVM's log) dropped, the repository's folder and the home folder written ``.`` and ``~``."""
    home = os.path.expanduser("~") + os.sep
    for cell in nb.cells:
        cell.get("metadata", {}).pop("execution", None)
        if "outputs" not in cell:
            continue
        cell["outputs"] = [o for o in cell["outputs"] if o.get("name") != "stderr"]
        for output in cell["outputs"]:
            if "text" in output:
                output["text"] = output["text"].replace(str(REPO), ".").replace(home, "~/")
            for kind, data in output.get("data", {}).items():
                if kind.startswith("text/") and isinstance(data, str):
                    output["data"][kind] = data.replace(str(REPO), ".").replace(home, "~/")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", default=".crawl/demo")
    parser.add_argument(
        "-p",
        "--parameter",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="a parameter of the notebook's first cell (papermill's -p)",
    )
    parser.add_argument("--out", type=Path, default=NOTEBOOK, help="default: the notebook")
    args = parser.parse_args()
    import nbformat

    parameters = {name: _value(value) for name, value in args.parameter}
    nb = execute(args.root, parameters=parameters)
    scrub(nb)
    if args.out.resolve() == NOTEBOOK.resolve():
        # the committed notebook keeps its outputs, not this run's parameters: an injected
        # CRAWL_ROOT would win over the environment of everyone who runs it after
        nb.cells = [c for c in nb.cells if "injected-parameters" not in c.metadata.get("tags", [])]
    nbformat.write(nb, args.out)
    print(f"wrote {args.out} ({sum(len(c.get('outputs', [])) for c in nb.cells)} outputs)")


if __name__ == "__main__":
    main()
