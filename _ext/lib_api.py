"""Sphinx extension: the API reference of ``lib``, one line per module, and short links to it.

* The directive ``lib-modules`` (for MyST pages) takes one module name per line and documents
  each with ``automodule`` (members in source order, Google-style docstrings through
  napoleon) under a heading of its own. Adding a module to the reference is adding its name
  to the list in ``api.md``.
* ``lib`` re-exports its public functions (``lib.empirical_ntk`` is ``lib.ntk.empirical_ntk``).
  A reference to the short name, e.g. ``{py:func}`lib.empirical_ntk```, is resolved to the
  entry of the module that defines it (``missing-reference``), so chapters can link with the
  name they call.
* The fields of a ``NamedTuple`` are described once, by the ``Attributes:`` section of its
  docstring (``autodoc-skip-member`` drops the generated "Alias for field number k" entries).
"""

from __future__ import annotations

import importlib

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles


class LibModulesDirective(SphinxDirective):
    has_content = True

    def run(self):
        names = [line.strip() for line in self.content if line.strip()
                 and not line.strip().startswith("#")]
        lines = []
        for name in names:
            try:
                importlib.import_module(name)
            except ImportError as err:
                raise self.error(f"lib-modules: cannot import {name}: {err}") from err
            # MyST Markdown (api.md is MyST; its nested parser reads Markdown)
            # autodoc writes reStructuredText: wrap it in eval-rst
            lines += [f"## `{name}`", "", "```{eval-rst}", f".. automodule:: {name}",
                      "   :members:", "   :member-order: bysource", "```", ""]
        container = nodes.section()
        container.document = self.state.document
        nested_parse_with_titles(self.state, StringList(lines, source=self.get_source_info()[0]),
                                 container)
        return container.children


def skip_tuple_fields(app, what, name, obj, skip, options):
    """NamedTuple fields are documented in the class's ``Attributes:`` section; skip the
    generated ``Alias for field number k`` entries (they would be described twice)."""
    doc = getattr(obj, "__doc__", None) or ""
    if doc.startswith("Alias for field number"):
        return True
    return None


def resolve_short_name(app, env, node, contnode):
    """``lib.<name>`` -> ``<defining module>.<name>`` for objects re-exported by ``lib``."""
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    parts = target.split(".")
    if len(parts) != 2 or parts[0] != "lib":
        return None
    try:
        obj = getattr(importlib.import_module("lib"), parts[1])
    except (ImportError, AttributeError):
        return None
    module = getattr(obj, "__module__", None)
    if not module or not module.startswith("lib.") or module == target:
        return None
    node = node.deepcopy()
    node["reftarget"] = f"{module}.{parts[1]}"
    domain = env.get_domain("py")
    return domain.resolve_xref(env, node["refdoc"], app.builder, node["reftype"],
                               node["reftarget"], node, contnode)


def setup(app):
    app.add_directive("lib-modules", LibModulesDirective)
    app.connect("missing-reference", resolve_short_name)
    app.connect("autodoc-skip-member", skip_tuple_fields)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
