r"""Turn a chapter notebook's MyST Markdown into plain Jupyter Markdown.

Every notebook the course hands out goes through :func:`convert_notebook`: the ``.ipynb``
download of each page (``_ext/notebook_links.py``), the Colab branch
(``scripts/export_notebooks.py``) and the student notebooks (``scripts/student.py``). Plain
Jupyter and Colab render ``$...$`` and ``$$...$$`` with MathJax but know nothing of MyST, so:

* ``{math}`` fences (and ``$$...$$ (label)``) become ``$$...$$`` display math; a labelled one
  carries its number as ``\tag{n}`` (numbers as on the page: ``<chapter>.<k>`` for the k-th
  labelled equation of the chapter);
* ``{prf:theorem}``, ``{prf:definition}``, ``{prf:lemma}``, ... become quoted blocks headed
  "**Theorem n** (title)", ``{prf:proof}`` a quoted block headed "*Proof.*"; admonitions
  (``note``, ``warning``, ...) quoted blocks headed by their kind;
* ``{exercise-start}``/``{exercise}`` become a heading "Exercise n", ``{solution-start}``/
  ``{solution}`` a heading "Solution to Exercise n"; their end markers are dropped;
* ``{cite}`` / ``{cite:p}`` become "(Author et al., 2020)", ``{cite:t}`` "Author et al.
  (2020)", and a last cell lists the references cited;
* ``{eq}`` becomes "(n)", ``{prf:ref}`` "Theorem n", ``{numref}`` of a figure "Figure n" (a
  figure is the code cell whose ``mystnb.figure.name`` metadata names it, numbered in order;
  its caption becomes a Markdown cell "**Figure n.** caption" below it, as on the page),
  ``{ref}``/``{numref}`` otherwise their text or label, ``{py:func}`` and other code roles
  inline code, any other role its text;
* target lines ``(label)=`` and MyST comments ``% ...`` are dropped; any other directive keeps
  its body in a quoted block headed by its name.

The module needs only the standard library (and pybtex, which sphinxcontrib-bibtex brings, to
read the bibliography), so the Sphinx extension and the scripts share it.
"""

from __future__ import annotations

import re
from pathlib import Path

MARK = "myst_to_jupyter"  # notebook metadata key: the notebook has been converted

PROOF_KINDS = {"theorem", "definition", "lemma", "proposition", "corollary", "conjecture",
               "example", "remark", "axiom", "criterion", "assumption", "property",
               "observation", "algorithm", "notation"}
ADMONITIONS = {"note", "warning", "tip", "important", "hint", "caution", "attention", "danger",
               "error", "seealso", "admonition", "margin", "sidebar", "dropdown"}

_OPEN = re.compile(r"^(\s*)(`{3,}|:{3,})\{([\w:.-]+)\}[ \t]*(.*?)\s*$")
_OPTION = re.compile(r"^\s*:([\w-]+):\s*(.*?)\s*$")
_TARGET = re.compile(r"^\s*\(([\w:.-]+)\)=\s*$")
_ROLE = re.compile(r"\{([\w:.-]+)\}`([^`]*)`")
_DOLLAR_LABEL = re.compile(r"^\s*\$\$\s*\(([\w:.-]+)\)\s*$")
# The book's MathJax macros (_config.yml, mathjax3_config.tex.macros; a test keeps the two
# equal): plain Jupyter does not know them, so the converted cells spell them out.
MACROS = {"R": "\\mathbb{R}", "E": "\\mathbb{E}"}
_MACRO = re.compile(r"\\(" + "|".join(MACROS) + r")(?![A-Za-z])")


def _expand_macros(line: str) -> str:
    return _MACRO.sub(lambda m: MACROS[m.group(1)], line)


class Numbers:
    """Numbers of a chapter's labelled items, counted in document order as Sphinx does."""

    def __init__(self, chapter: str | int | None = None):
        self.prefix = f"{chapter}." if chapter not in (None, "") else ""
        self.counts: dict[str, int] = {}
        self.labels: dict[str, tuple[str, str]] = {}  # label -> (kind, number)

    def add(self, kind: str, label: str | None) -> str:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        number = f"{self.prefix}{self.counts[kind]}"
        if label:
            self.labels[label] = (kind, number)
        return number


# --------------------------------------------------------------------------------------------
# Bibliography
# --------------------------------------------------------------------------------------------


def read_bibliography(paths) -> dict[str, dict]:
    """key -> {"cite": "Author et al.", "year": "2020", "entry": "full reference"}."""
    from pybtex.database import parse_file

    out = {}
    for path in paths:
        data = parse_file(str(path))
        for key, entry in data.entries.items():
            people = entry.persons.get("author") or entry.persons.get("editor") or []
            last = [" ".join(p.last_names) for p in people]
            last = [_detex(x) for x in last]
            if len(last) >= 3:
                short = f"{last[0]} et al."
            elif len(last) == 2:
                short = f"{last[0]} and {last[1]}"
            else:
                short = last[0] if last else key
            fields = entry.fields
            year = fields.get("year", "n.d.")
            names = ", ".join(_detex(" ".join(p.first_names + p.middle_names + p.last_names))
                              for p in people)
            where = fields.get("journal") or fields.get("booktitle") or fields.get(
                "publisher") or fields.get("eprint", "")
            title = _detex(fields.get("title", ""))
            full = f"{names} ({year}). {title}." + (f" *{_detex(where)}*." if where else "")
            out[key] = {"cite": short, "year": year, "entry": full}
    return out


def _detex(text: str) -> str:
    text = re.sub(r"\\[`'\"^~=.]\s*\{?\s*\\?(\w)\s*\}?", r"\1", text)  # accents: keep the letter
    return text.replace("{", "").replace("}", "").replace("--", "–")


# --------------------------------------------------------------------------------------------
# Conversion
# --------------------------------------------------------------------------------------------


def _split_blocks(lines: list[str]):
    """Yield ("text", line) and ("directive", name, arg, options, body_lines) items."""
    i = 0
    while i < len(lines):
        m = _OPEN.match(lines[i])
        if not m:
            yield ("text", lines[i])
            i += 1
            continue
        indent, fence, name, arg = m.groups()
        j = i + 1
        options = {}
        while j < len(lines) and _OPTION.match(lines[j]):
            key, value = _OPTION.match(lines[j]).groups()
            options[key] = value
            j += 1
        body, depth = [], 0
        while j < len(lines):
            line = lines[j].strip()
            inner = _OPEN.match(lines[j])
            if inner and inner.group(2)[0] == fence[0] and len(inner.group(2)) == len(fence):
                depth += 1
            elif line and set(line) == {fence[0]} and len(line) >= len(fence):
                if depth == 0:
                    break
                depth -= 1
            body.append(lines[j])
            j += 1
        yield ("directive", name, arg, options, body)
        i = j + 1


def _quote(text: str) -> list[str]:
    return [("> " + line).rstrip() for line in text.strip("\n").split("\n")]


def _scan_numbers(cells_sources: list[str], numbers: Numbers) -> None:
    """First pass: number labelled equations, proof boxes and exercises in document order."""
    for source in cells_sources:
        _walk_numbers(source.split("\n"), numbers)


def _walk_numbers(lines, numbers: Numbers) -> None:
    for item in _split_blocks(lines):
        if item[0] == "text":
            m = _DOLLAR_LABEL.match(item[1])
            if m:
                numbers.add("equation", m.group(1))
            continue
        _, name, arg, options, body = item
        kind = name.split(":", 1)[-1]
        if name == "math" and options.get("label"):
            numbers.add("equation", options["label"])
        elif name.startswith("prf:") and kind in PROOF_KINDS and "nonumber" not in options:
            numbers.add(kind, options.get("label"))
        elif name in ("exercise", "exercise-start") and "nonumber" not in options:
            numbers.add("exercise", options.get("label"))
        if name not in ("math",):
            _walk_numbers(body, numbers)


def labelled_equations(lines) -> dict[str, list[str]]:
    """Label -> the body lines (LaTeX, without delimiters) of each labelled equation in MyST
    Markdown ``lines``: ``{math}`` fences with a ``:label:`` (at any depth) and ``$$ ...``
    displays closed by ``$$ (label)``."""
    out: dict[str, list[str]] = {}
    opened: list[str] | None = None  # body of an open "$$" display
    for item in _split_blocks(list(lines)):
        if item[0] == "text":
            line = item[1]
            m = _DOLLAR_LABEL.match(line)
            if m:
                if opened is not None:
                    out.setdefault(m.group(1), [x for x in opened if x.strip()])
                opened = None
            elif opened is not None:
                if line.strip().endswith("$$"):  # an unlabelled display closes
                    opened = None
                else:
                    opened.append(line)
            elif line.strip().startswith("$$") and not line.strip()[2:].rstrip().endswith("$$"):
                rest = line.strip()[2:].strip()
                opened = [rest] if rest else []
            continue
        _, name, arg, options, body = item
        if name == "math":
            if options.get("label"):
                out.setdefault(options["label"], "\n".join(body).strip("\n").split("\n"))
        else:
            for label, eq in labelled_equations(body).items():
                out.setdefault(label, eq)
    return out


def equation_references(text: str) -> list[str]:
    """Labels of the ``{eq}`` roles in ``text``, in order, each once."""
    return list(dict.fromkeys(m.group(2) for m in _ROLE.finditer(text) if m.group(1) == "eq"))


def _convert_lines(lines, numbers: Numbers, bib: dict, cited: list) -> list[str]:
    out: list[str] = []
    pending_dollar = None
    for item in _split_blocks(lines):
        if item[0] == "text":
            line = item[1]
            m = _DOLLAR_LABEL.match(line)
            if m and out and pending_dollar is None:
                # "$$ (label)" closes a display: put the tag inside it
                number = numbers.labels.get(m.group(1), ("equation", "?"))[1]
                out.append(f"\\tag{{{number}}}")
                out.append("$$")
                continue
            if _TARGET.match(line) or re.match(r"^\s*%", line):
                continue
            out.append(_roles(line, numbers, bib, cited))
            continue
        _, name, arg, options, body = item
        kind = name.split(":", 1)[-1]
        if name == "math":
            label = options.get("label")
            out.append("$$")
            out.extend(body_line for body_line in "\n".join(body).strip("\n").split("\n"))
            if label and label in numbers.labels:
                out.append(f"\\tag{{{numbers.labels[label][1]}}}")
            out.append("$$")
        elif name.startswith("prf:"):
            inner = "\n".join(_convert_lines(body, numbers, bib, cited))
            if kind == "proof":
                head = "*Proof.*"
                inner = inner.rstrip() + " $\\blacksquare$"
            else:
                label = options.get("label")
                number = numbers.labels.get(label, (kind, ""))[1] if label else ""
                head = f"**{kind.capitalize()}{' ' + number if number else ''}**"
                if arg:
                    head += f" ({_roles(arg, numbers, bib, cited)})"
                head += "."
            out.extend(_quote(f"{head} {inner.lstrip()}"))
            out.append("")
        elif name in ("exercise-start", "exercise"):
            label = options.get("label")
            number = numbers.labels.get(label, ("exercise", ""))[1] if label else ""
            title = f" ({_roles(arg, numbers, bib, cited)})" if arg else ""
            out.append(f"#### Exercise {number}{title}".rstrip())
            out.append("")
            out.extend(_convert_lines(body, numbers, bib, cited))
        elif name in ("solution-start", "solution"):
            target = arg.split()[0] if arg else ""
            number = numbers.labels.get(target, ("exercise", target))[1]
            out.append(f"#### Solution to Exercise {number}".rstrip())
            out.append("")
            out.extend(_convert_lines(body, numbers, bib, cited))
        elif name in ("exercise-end", "solution-end"):
            continue
        elif name in ADMONITIONS:
            head = arg if name == "admonition" and arg else name.capitalize()
            inner = "\n".join(_convert_lines(body, numbers, bib, cited))
            out.extend(_quote(f"**{_roles(head, numbers, bib, cited)}.** {inner.lstrip()}"))
            out.append("")
        elif name in ("code-block", "code", "sourcecode"):
            out.append(f"```{arg}".rstrip())
            out.extend(body)
            out.append("```")
        else:  # an unknown directive: keep its content, say what it was
            inner = "\n".join(_convert_lines(body, numbers, bib, cited))
            head = f"**{name}{' ' + arg if arg else ''}.**"
            out.extend(_quote(f"{head} {inner.lstrip()}"))
            out.append("")
    return [_expand_macros(line) for line in out]


def _roles(text: str, numbers: Numbers, bib: dict, cited: list) -> str:
    def cite(keys: str, textual: bool) -> str:
        parts = []
        for key in (k.strip() for k in keys.split(",") if k.strip()):
            if key not in cited:
                cited.append(key)
            ref = bib.get(key)
            if ref is None:
                parts.append(key)
            elif textual:
                parts.append(f"{ref['cite']} ({ref['year']})")
            else:
                parts.append(f"{ref['cite']}, {ref['year']}")
        return "; ".join(parts) if textual else f"({'; '.join(parts)})"

    def explicit(content: str):
        m = re.match(r"^(.*?)\s*<([^<>]+)>$", content, re.S)
        return (m.group(1), m.group(2)) if m else (None, content)

    def repl(m):
        role, content = m.group(1), m.group(2)
        if role in ("cite", "cite:p", "cite:ps", "cite:cp", "cite:alp"):
            return cite(content, textual=False)
        if role.startswith("cite:t") or role in ("cite:ct", "cite:author", "cite:year"):
            return cite(content, textual=True)
        if role == "eq":
            return f"({numbers.labels.get(content, ('', content))[1]})"
        if role in ("prf:ref", "numref", "ref", "doc", "term", "any"):
            title, label = explicit(content)
            if title:
                return title
            if label in numbers.labels:
                kind, number = numbers.labels[label]
                return f"{kind.capitalize()} {number}"
            return label
        if role == "math":
            return f"${content}$"
        if role.startswith("py:") or role in ("func", "class", "mod", "meth", "attr", "code",
                                              "file", "command", "kbd", "samp"):
            title, target = explicit(content)
            return f"`{title or target.lstrip('~')}`"
        if role == "abbr":
            return explicit(content.replace("(", "<").replace(")", ">"))[0] or content
        return explicit(content)[0] or content

    return _ROLE.sub(repl, text)


def convert_notebook(nb, *, bib: dict | None = None, chapter: str | int | None = None):
    """Convert the markdown cells of ``nb`` (an nbformat v4 notebook) in place; return it.

    Args:
        nb: the notebook; code cells and outputs are left alone.
        bib: the bibliography, from :func:`read_bibliography` (citations of unknown keys show
            the key).
        chapter: the chapter's number in the book (equations "n.k"), or None.

    A notebook already converted (``metadata.myst_to_jupyter``) is returned unchanged.
    """
    import nbformat

    if nb.metadata.get(MARK):
        return nb
    bib = bib or {}
    numbers = Numbers(chapter)
    md = [c for c in nb.cells if c.cell_type == "markdown"]
    _scan_numbers([c.source for c in md], numbers)
    for cell in nb.cells:  # figures: the MyST-NB metadata of the cell that draws each one
        figure = ((cell.metadata.get("mystnb") or {}).get("figure") or {})
        if cell.cell_type == "code" and isinstance(figure, dict) and figure.get("name"):
            numbers.add("figure", str(figure["name"]))
    cited: list[str] = []
    for cell in md:
        cell.source = "\n".join(_convert_lines(cell.source.split("\n"), numbers, bib,
                                               cited)).strip("\n")
    cells = []  # each figure's caption, numbered as on the page, as a cell below its figure
    for cell in nb.cells:
        cells.append(cell)
        figure = ((cell.metadata.get("mystnb") or {}).get("figure") or {})
        caption = figure.get("caption") if isinstance(figure, dict) else None
        if cell.cell_type != "code" or not caption or not figure.get("name"):
            continue
        number = numbers.labels.get(str(figure["name"]), ("figure", ""))[1]
        text = "\n".join(_convert_lines(str(caption).strip().split("\n"), numbers, bib, cited))
        below = nbformat.v4.new_markdown_cell(f"**Figure {number}.** {text.strip()}")
        below.metadata["tags"] = ["figure-caption"]
        if nb.get("nbformat_minor", 5) < 5:
            below.pop("id", None)
        cells.append(below)
    nb.cells = cells
    if cited:
        lines = ["## References", ""]
        for key in sorted(cited, key=lambda k: (bib.get(k, {}).get("cite", k),
                                                bib.get(k, {}).get("year", ""))):
            lines.append(f"- {bib[key]['entry']}" if key in bib else f"- {key}")
        refs = nbformat.v4.new_markdown_cell("\n".join(lines))
        refs.metadata["tags"] = ["references"]
        if nb.get("nbformat_minor", 5) < 5:
            refs.pop("id", None)
        nb.cells.append(refs)
    nb.metadata[MARK] = {"chapter": chapter}
    return nb


def convert_file(path, *, bib_files=(), chapter=None) -> None:
    """Convert the notebook file at ``path`` in place (see :func:`convert_notebook`)."""
    import nbformat

    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    convert_notebook(nb, bib=read_bibliography(bib_files) if bib_files else None,
                     chapter=chapter)
    nbformat.validate(nb)
    nbformat.write(nb, path)


def chapter_numbers(root) -> dict[str, int]:
    """Chapter file stem -> its number in the book (numbered parts of ``_toc.yml``, in order),
    as Jupyter Book numbers them."""
    import yaml

    toc = yaml.safe_load((Path(root) / "_toc.yml").read_text())
    numbered_default = bool((toc.get("options") or {}).get("numbered"))
    out, n = {}, 0
    parts = toc.get("parts") or [{"chapters": toc.get("chapters", [])}]
    for part in parts:
        numbered = part.get("numbered", numbered_default)
        for chapter in part.get("chapters", []):
            if numbered and "file" in chapter:
                n += 1
                out[Path(chapter["file"]).stem] = n
    return out


def main(argv=None) -> int:
    """``python _ext/myst_to_jupyter.py NOTEBOOK...``: convert notebooks of this course in
    place (chapter numbers from ``_toc.yml``, references from ``references.bib``). Binder's
    ``postBuild`` runs it on the notebooks jupytext makes from the chapters."""
    import sys

    root = Path(__file__).resolve().parents[1]
    numbers = chapter_numbers(root)
    for name in (sys.argv[1:] if argv is None else argv):
        convert_file(name, bib_files=[root / "references.bib"],
                     chapter=numbers.get(Path(name).stem))
        print(f"converted {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
