"""The downloaded chapter notebook: install cell and the book's TeX macros (_ext/notebook_links)."""

import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_ext"))
import notebook_links as nl  # noqa: E402


def test_install_and_macro_cells_are_added_once(tmp_path):
    path = tmp_path / "chapter.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("$x \\in \\R^d$"), nbformat.v4.new_code_cell("1")]
    nbformat.write(nb, path)
    for _ in range(2):  # a second call (incremental build) changes nothing
        nl.add_install_cell(path, "https://example.org/course", "main",
                            macros={"R": "\\mathbb{R}", "E": "\\mathbb{E}"})
    out = nbformat.read(path, as_version=4)
    nbformat.validate(out)
    assert [c.cell_type for c in out.cells] == ["markdown", "code", "markdown", "code"]
    assert "\\newcommand{\\R}{\\mathbb{R}}\\newcommand{\\E}{\\mathbb{E}}" in out.cells[0].source
    assert "git+https://example.org/course@main" in out.cells[1].source
    compile(out.cells[1].source, "install", "exec")  # valid Python


def test_no_macro_cell_without_macros(tmp_path):
    path = tmp_path / "chapter.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")]), path)
    nl.add_install_cell(path, "https://example.org/course", "main")
    assert [c.cell_type for c in nbformat.read(path, as_version=4).cells] == ["code", "code"]
