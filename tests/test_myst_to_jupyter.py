"""MyST -> plain Jupyter Markdown for every notebook the course hands out (issue 17, input 4):
downloads (_ext/notebook_links.py), the Colab export and the student notebooks."""

import re
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "_ext"))
import myst_to_jupyter as m2j  # noqa: E402

SAMPLE = r"""# Title

(sec-target)=
## Section

```{math}
:label: eq-a
a = b
```

```{math}
c = d
```

```{prf:theorem} Scaling
:label: thm-scaling

It scales {cite}`woodworth2020kernel`.
```

```{prf:proof}
Obvious from {eq}`eq-b`.
```

$$
e = f
$$ (eq-b)

By {prf:ref}`thm-scaling` and {eq}`eq-a`, {cite:t}`chizat2019lazy` show it; see
{py:func}`lib.gradient_descent`.

```{exercise-start}
:label: ex-one
```
**(Coding.)** Do it.
```{exercise-end}
```

```{solution-start} ex-one
:class: dropdown
```
Done.
```{solution-end}
```
"""


def convert(source, chapter=2):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(source)])
    bib = m2j.read_bibliography([ROOT / "references.bib"])
    return m2j.convert_notebook(nb, bib=bib, chapter=chapter)


def test_sample_converts_every_construct():
    nb = convert(SAMPLE)
    text = nb.cells[0].source
    assert "{" + "math}" not in text and "{prf:" not in text and "{cite" not in text
    assert "(sec-target)=" not in text
    # labelled equations numbered as on the page (chapter 2), unlabelled one not
    assert text.count("$$") == 6
    assert "a = b\n\\tag{2.1}\n$$" in text and "c = d\n$$" in text
    assert "e = f\n\\tag{2.2}\n$$" in text
    assert "> **Theorem 2.1** (Scaling). It scales (Woodworth et al., 2020)." in text
    assert "> *Proof.* Obvious from (2.2). $\\blacksquare$" in text
    assert "By Theorem 2.1 and (2.1), Chizat et al. (2019) show it" in text
    assert "`lib.gradient_descent`" in text
    assert "#### Exercise 2.1\n" in text and "#### Solution to Exercise 2.1" in text
    refs = nb.cells[-1]
    assert refs.source.startswith("## References")
    assert "Woodworth" in refs.source and "Chizat" in refs.source
    assert convert(SAMPLE).cells[0].source == text  # deterministic
    again = m2j.convert_notebook(nb)  # converting twice changes nothing
    assert again.cells[0].source == text and len(again.cells) == 2


@pytest.mark.parametrize("chapter", sorted(p.stem for p in (ROOT / "chapters").glob("*.md")))
def test_every_chapter_has_no_myst_left(chapter):
    """Every display equation of the chapter becomes a $$ block; no MyST markup is left."""
    src = (ROOT / "chapters" / f"{chapter}.md").read_text()
    nb = jupytext.read(ROOT / "chapters" / f"{chapter}.md")
    markdown_src = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    fences = len(re.findall(r"^```\{math\}", markdown_src, re.M))
    dollars = len(re.findall(r"^\s*\$\$\s*$", markdown_src, re.M)) // 2
    labelled = len(re.findall(r"^```\{math\}\n:label:", markdown_src, re.M))
    numbers = m2j.chapter_numbers(ROOT)
    out = m2j.convert_notebook(nb, bib=m2j.read_bibliography([ROOT / "references.bib"]),
                               chapter=numbers.get(chapter))
    text = "\n".join(c.source for c in out.cells if c.cell_type == "markdown")
    assert len(re.findall(r"^(?:> )*\$\$$", text, re.M)) == 2 * (fences + dollars)
    assert len(re.findall(r"\\tag\{", text)) >= labelled
    leftovers = re.findall(r"\{[\w:-]+\}`|^```\{|^:::\{", text, re.M)
    assert not leftovers, leftovers[:5]
    assert ("{cite" in src) == out.cells[-1].source.startswith("## References")


def test_colab_export_converts_a_notebook_built_by_another_route(tmp_path, monkeypatch):
    """scripts/export_notebooks.py copies the built notebooks for the Colab branch: one that is
    still MyST (not converted by the download extension) is converted on the way."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import export_notebooks

    site = tmp_path / "book"
    sources = site / "_build" / "html" / "_sources" / "chapters"
    sources.mkdir(parents=True)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(SAMPLE)])
    nbformat.write(nb, sources / "setup.ipynb")
    for name in ("_toc.yml", "references.bib"):
        (site / name).write_text((ROOT / name).read_text())
    monkeypatch.setattr(export_notebooks, "ROOT", site)
    assert export_notebooks.main([str(tmp_path / "out")]) == 0
    out = nbformat.read(tmp_path / "out" / "chapters" / "setup.ipynb", as_version=4)
    assert "\\tag{1.1}" in out.cells[0].source  # setup is chapter 1 of the course's _toc.yml
    assert out.cells[-1].source.startswith("## References")


def test_figure_references_become_figure_numbers():
    """{numref} of a figure (named in the drawing cell's mystnb.figure metadata) reads as on the
    page, "Figure <chapter>.<k>" with k counted over the figure cells in order."""
    cells = [nbformat.v4.new_markdown_cell("See {numref}`fig-b` and {numref}`fig-a`."),
             nbformat.v4.new_code_cell("plot_a()"), nbformat.v4.new_code_cell("x = 1"),
             nbformat.v4.new_code_cell("plot_b()")]
    cells[1].metadata["mystnb"] = {"figure": {"name": "fig-a", "caption": "A."}}
    cells[3].metadata["mystnb"] = {"figure": {"name": "fig-b"}, "image": {"alt": "B"}}
    nb = m2j.convert_notebook(nbformat.v4.new_notebook(cells=cells), chapter=3)
    assert nb.cells[0].source == "See Figure 3.2 and Figure 3.1."


def test_figure_captions_become_cells_below_their_figures():
    """A figure's caption (with its math and references converted) is a Markdown cell right
    below the cell that draws it, numbered as on the page; a figure without caption gets none."""
    cells = [nbformat.v4.new_code_cell("plot_a()"), nbformat.v4.new_code_cell("plot_b()"),
             nbformat.v4.new_code_cell("x = 1")]
    cells[0].metadata["mystnb"] = {"figure": {"name": "fig-a",
                                              "caption": "Slope $-1$; compare {numref}`fig-b`."}}
    cells[1].metadata["mystnb"] = {"figure": {"name": "fig-b"}}
    nb = m2j.convert_notebook(nbformat.v4.new_notebook(cells=cells), chapter=2)
    kinds = [c.cell_type for c in nb.cells]
    assert kinds == ["code", "markdown", "code", "code"], kinds
    assert nb.cells[1].source == "**Figure 2.1.** Slope $-1$; compare Figure 2.2."
    assert nb.cells[1].metadata["tags"] == ["figure-caption"]


@pytest.mark.parametrize("chapter", sorted(p.stem for p in (ROOT / "chapters").glob("*.md")))
def test_every_figure_reference_resolves(chapter):
    """Every {numref} of a chapter names one of its figures; each figure has a caption and an
    alternative text, and the converted notebook reads "Figure n.k" where the page does."""
    nb = jupytext.read(ROOT / "chapters" / f"{chapter}.md")
    figures = [c.metadata["mystnb"] for c in nb.cells
               if c.cell_type == "code" and "figure" in c.metadata.get("mystnb", {})]
    names = [f["figure"]["name"] for f in figures]
    assert len(names) == len(set(names)), names
    for f in figures:
        assert f["figure"].get("caption"), f
        assert f.get("image", {}).get("alt") or f["figure"]["name"] == "fig-f1f2-animation", f
    text = "\n".join(c.source for c in nb.cells)
    refs = re.findall(r"\{numref\}`([^`]+)`", text)
    assert set(refs) <= set(names), set(refs) - set(names)
    number = m2j.chapter_numbers(ROOT).get(chapter)
    out = m2j.convert_notebook(nb, chapter=number)
    md = "\n".join(c.source for c in out.cells if c.cell_type == "markdown")
    assert "fig-" not in md
    for k, name in enumerate(names, 1):
        if name in refs:
            assert f"Figure {number}.{k}" in md, (name, k)


def test_book_macros_are_spelled_out_for_plain_jupyter():
    """Plain Jupyter does not load the book's MathJax macros: ``\\R`` and ``\\E`` become
    ``\\mathbb{R}``, ``\\mathbb{E}`` (in text and display math), ``\\Rightarrow`` is left alone,
    and the converter's list is the book's list."""
    import yaml

    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert m2j.MACROS == config["sphinx"]["config"]["mathjax3_config"]["tex"]["macros"]
    lines = ["Inputs $x\\in\\R^d$, $\\E[y] \\Rightarrow 0$.", "", "```{math}", "\\R^{N}", "```"]
    out = "\n".join(m2j._convert_lines(lines, m2j.Numbers(1), {}, []))
    assert "\\mathbb{R}^d" in out and "\\mathbb{E}[y] \\Rightarrow 0" in out
    assert "\\mathbb{R}^{N}" in out and not re.search(r"\\[RE](?![A-Za-z])", out)
