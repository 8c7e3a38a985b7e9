"""Sphinx extension for the student site: drop gated solutions as well as plain ones.

sphinx-exercise's ``hide_solutions = True`` removes ``{solution}`` directives, but with its
gated form (``{solution-start}`` ... ``{solution-end}``, which the course uses so solutions
can hold executed code cells) version 1.2.1 only drops the start marker: the code cells in
between stay on the page and the leftover end marker stops the HTML writer ("unknown node
type: solution_end_node"). This extension, loaded after sphinx-exercise by the student build
only (``scripts/student.py site``; the instructor build never loads it), replaces both gated
markers by placeholders and removes everything between them when the document is read, so no
part of a gated solution reaches the output. It also drops the outputs of cells tagged
``check``: computed with the solution, they would say "passes" under a hidden solution.
"""

from __future__ import annotations

from docutils import nodes
from sphinx.util.docutils import SphinxDirective


class _gate_start(nodes.Element):
    """Placeholder for ``{solution-start}``; removed with what follows it."""


class _gate_end(nodes.Element):
    """Placeholder for ``{solution-end}``; removed."""


class _HiddenSolutionStart(SphinxDirective):
    required_arguments = 1
    optional_arguments = 0
    final_argument_whitespace = False
    has_content = True
    option_spec = {"label": lambda x: x, "class": lambda x: x, "hidden": lambda x: x}

    def run(self):
        return [_gate_start()]


class _HiddenSolutionEnd(SphinxDirective):
    has_content = False

    def run(self):
        return [_gate_end()]


def _drop_gated(app, doctree):
    for start in list(doctree.findall(_gate_start)):
        parent = start.parent
        if parent is None:
            continue
        index = parent.index(start)
        doomed = []
        for node in parent.children[index:]:
            doomed.append(node)
            if isinstance(node, _gate_end):
                break
        else:
            raise ValueError(f"{app.env.docname}: a solution-start without its solution-end "
                             "at the same level")
        for node in doomed:
            parent.remove(node)
    for end in list(doctree.findall(_gate_end)):  # an end without a start: drop the marker
        end.parent.remove(end)
    # A check cell's output was computed with the solution ("passes"): show the call only.
    for cell in list(doctree.findall(nodes.container)):
        if "tag_check" in cell.get("classes", []):
            for child in list(cell.children):
                if "cell_output" in child.get("classes", []):
                    cell.remove(child)


def _no_links_to_solutions(app, config):
    """The student site offers no download of sources or notebooks and no Binder/Colab launch:
    both lead to the chapter files, which carry the solutions."""
    opts = dict(config.html_theme_options or {})
    opts["use_download_button"] = False
    opts.pop("launch_buttons", None)
    config.html_theme_options = opts


def setup(app):
    app.connect("config-inited", _no_links_to_solutions, priority=900)
    app.setup_extension("sphinx_exercise")
    app.add_node(_gate_start)
    app.add_node(_gate_end)
    app.add_directive("solution-start", _HiddenSolutionStart, override=True)
    app.add_directive("solution-end", _HiddenSolutionEnd, override=True)
    app.connect("doctree-read", _drop_gated)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
