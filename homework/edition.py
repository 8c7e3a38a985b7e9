"""Homework: student editions of the chapters and a grader for submitted notebooks.

The course's chapters follow one exercise convention (``CONTRIBUTING.md``): an exercise is a
sphinx-exercise directive (``{exercise}`` or gated ``{exercise-start}``), its solution a
``{solution}`` or gated ``{solution-start} <label>`` ... ``{solution-end}`` block; a coding
solution is a code cell tagged ``solution`` inside that block, followed (outside the block) by
a code cell tagged ``check`` that calls ``lib.check("<chapter>/<exercise>", answer)``. Everything
here is derived from that convention, so a new chapter needs no change to this module.

* :func:`exercises` lists a chapter's exercises (label, kind, check id, answer expression).
* ``StudentEdition`` (an nbconvert preprocessor) turns a chapter into the student
  notebook: each ``solution`` cell becomes a stub raising ``NotImplementedError`` that names
  the exercise (:func:`stub_source`), every other part of a solution is removed, check cells
  stay. Values asked for by an exercise become :func:`todo` placeholders, whose use raises
  ``NotImplementedError``, so their checks report "not attempted" instead of crashing.
* :func:`write_student_notebooks` and :func:`build_student_site` are the two instructor
  commands behind ``scripts/student.py``; :func:`find_leaks` checks that an output contains
  no line of any solution.
* Grading is done by otter-grader: :mod:`homework.otter` (``make assign``) and
  :mod:`homework.grade` (``make grade``).

The heavy imports (nbformat, nbclient, jupytext, nbconvert) happen inside the functions, so
``import lib`` stays fast in a student's kernel, where only :func:`todo` is used.
"""

from __future__ import annotations

import ast
import hashlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "Exercise",
    "NotAttempted",
    "StudentEdition",  # noqa: F822 (made on first use, see __getattr__)
    "build_student_site",
    "chapter_notebook",
    "exercises",
    "find_leaks",
    "resolve_chapter",
    "solution_snippets",
    "student_config",
    "student_notebook",
    "stub_source",
    "toc_chapters",
    "todo",
    "write_student_notebooks",
]

ROOT = Path(__file__).resolve().parents[1]
"""The course's root folder (holding ``_config.yml``, ``_toc.yml``, ``chapters/``, ``lib/``)."""

SOLUTION_TAG = "solution"
CHECK_TAG = "check"


# --------------------------------------------------------------------------------------------
# Placeholders for the student edition
# --------------------------------------------------------------------------------------------


class NotAttempted:
    """Placeholder for a value an exercise asks for; any use raises ``NotImplementedError``.

    ``lib.check`` reports an answer that raises ``NotImplementedError`` as "not attempted", so a
    student notebook in which ``total = todo("chapter/exercise")`` still runs top to bottom:
    the check of that exercise says "not attempted" instead of crashing on a missing name.
    Only ``repr`` works (the notebook may display the placeholder).
    """

    __slots__ = ("_exercise",)

    def __init__(self, exercise: str):
        object.__setattr__(self, "_exercise", str(exercise))

    def _refuse(self, *args, **kwargs):
        raise NotImplementedError(f"exercise {self._exercise} is not attempted yet: replace the "
                                  "todo(...) placeholder by your answer")

    def __repr__(self):
        return f"todo({self._exercise!r})"

    def __getattr__(self, name):
        if name.startswith("_"):  # dunders and IPython's _repr_*_ probes
            raise AttributeError(name)
        self._refuse()

    __call__ = __array__ = __jax_array__ = __float__ = __int__ = __index__ = __complex__ = _refuse
    __len__ = __iter__ = __getitem__ = __bool__ = __contains__ = __setattr__ = _refuse
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = _refuse
    __rtruediv__ = __matmul__ = __rmatmul__ = __pow__ = __rpow__ = __neg__ = __abs__ = _refuse
    __lt__ = __le__ = __gt__ = __ge__ = _refuse
    __hash__ = object.__hash__


def todo(exercise: str) -> NotAttempted:
    """The placeholder a student notebook puts where an exercise asks for a value.

    Args:
        exercise: the exercise id, e.g. ``"setup/gd-least-squares"`` (any string).

    Returns:
        A :class:`NotAttempted` whose every use (call, arithmetic, ``np.asarray``, ``float``,
        attribute access) raises ``NotImplementedError`` naming ``exercise``.

    Example:
        >>> total = todo("demo/total")
        >>> float(total)
        Traceback (most recent call last):
        NotImplementedError: exercise demo/total is not attempted yet: ...
    """
    return NotAttempted(exercise)


# --------------------------------------------------------------------------------------------
# Reading the convention out of a chapter
# --------------------------------------------------------------------------------------------

_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|:{3,})\s*(?P<info>.*?)\s*$")
_DIRECTIVE = re.compile(r"^\{(?P<name>[\w-]+)\}\s*(?P<args>.*)$")


@dataclass(frozen=True)
class Exercise:
    """One exercise of a chapter, as found by :func:`exercises`.

    Attributes:
        label: the sphinx-exercise label (``setup-ex-symmetrize``); for a check cell with no
            solution block before it, the check id.
        kind: ``"coding"`` (a ``solution``-tagged code cell or a ``check`` cell) or
            ``"derivation"`` (a solution made of text only).
        check_id: the id passed to ``lib.check`` (``"setup/symmetrize"``), or ``None``.
        answer: the source of the answer expression in that call (``"symmetrize"``), or
            ``None``.
    """

    label: str
    kind: str
    check_id: str | None = None
    answer: str | None = None


def _tags(cell) -> set[str]:
    tags = cell.get("metadata", {}).get("tags", [])
    return {str(t) for t in tags} if isinstance(tags, list) else set()


def _check_call(source: str) -> tuple[str, str] | None:
    """``(exercise id, answer expression)`` of the first ``check("id", answer)`` call."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or len(node.args) < 2:
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        first = node.args[0]
        if name == "check" and isinstance(first, ast.Constant) and isinstance(first.value, str):
            return first.value, ast.get_source_segment(source, node.args[1])
    return None


def _directive(line: str):
    """``(fence, name, args)`` if ``line`` opens a MyST directive, ``(fence, None, info)`` if it
    opens a plain fenced block, ``None`` otherwise."""
    m = _FENCE.match(line)
    if not m:
        return None
    d = _DIRECTIVE.match(m["info"])
    if d:
        return m["fence"], d["name"], d["args"].strip()
    return m["fence"], None, m["info"]


def _closes(line: str, fence: str) -> bool:
    m = _FENCE.match(line)
    return bool(m) and not m["info"] and m["fence"][0] == fence[0] and len(m["fence"]) >= len(fence)


def _block_end(lines: list[str], start: int, fence: str) -> int:
    """Index of the line closing the block opened at ``start`` (``len(lines) - 1`` if none)."""
    for j in range(start + 1, len(lines)):
        if _closes(lines[j], fence):
            return j
    return len(lines) - 1


def _label_option(block: list[str]) -> str | None:
    for line in block:
        m = re.match(r"^\s*:label:\s*(\S+)", line)
        if m:
            return m.group(1)
    return None


@dataclass
class _Scan:
    """Result of walking a chapter's cells (shared by :func:`exercises` and the edition)."""

    cells: list = field(default_factory=list)  # (action, cell, ...) per cell
    exercises: list = field(default_factory=list)
    removed: list = field(default_factory=list)  # text of every removed solution part


def _scan(nb) -> _Scan:
    """Walk the cells once, deciding what the student edition keeps, stubs and removes.

    ``scan.cells`` holds one tuple per cell: ``("keep", cell, None)``,
    ``("markdown", cell, kept_source, [(line, solution_label), ...])`` (where the placeholder
    sentences go), ``("stub", cell, solution_label)`` or ``("drop", cell, solution_label)``;
    ``scan.removed`` every line taken out; ``scan.exercises`` the :class:`Exercise` list.
    """
    scan = _Scan()
    gated: str | None = None  # label of the gated solution we are inside
    gated_has_code = False
    labels_seen: list[str] = []
    kinds: dict[str, str] = {}
    pending_label: str | None = None  # last coding solution waiting for its check cell
    checks: dict[str, tuple[str, str]] = {}

    for cell in nb.cells:
        if cell.cell_type == "markdown":
            lines = cell.source.split("\n")
            kept: list[str] = []
            placeholders: list[tuple[int, str]] = []  # (position in kept, solution label)
            i = 0
            while i < len(lines):
                line = lines[i]
                opened = _directive(line)
                if gated is not None:
                    if opened and opened[1] == "solution-end":
                        end = _block_end(lines, i, opened[0])
                        kinds.setdefault(gated, "coding" if gated_has_code else "derivation")
                        gated = None
                        i = end + 1
                        continue
                    scan.removed.append(line)
                    i += 1
                    continue
                if opened is None:
                    kept.append(line)
                    i += 1
                    continue
                fence, name, args = opened
                end = _block_end(lines, i, fence)
                block = lines[i:end + 1]
                if name == "solution-start":
                    gated = args.split()[0] if args else f"solution-{len(labels_seen)}"
                    gated_has_code = False
                    placeholders.append((len(kept), gated))
                    i = end + 1
                    continue
                if name == "solution":
                    label = args.split()[0] if args else f"solution-{len(labels_seen)}"
                    scan.removed.extend(block[1:-1])
                    kinds.setdefault(label, "derivation")
                    placeholders.append((len(kept), label))
                    i = end + 1
                    continue
                if name in ("exercise", "exercise-start"):
                    label = _label_option(block)
                    if label:
                        labels_seen.append(label)
                kept.extend(block)
                i = end + 1
            scan.cells.append(("markdown", cell, "\n".join(kept), placeholders))
        elif cell.cell_type == "code":
            tags = _tags(cell)
            if gated is not None:
                if SOLUTION_TAG in tags:
                    gated_has_code = True
                    kinds[gated] = "coding"
                    pending_label = gated
                    scan.cells.append(("stub", cell, gated))
                else:
                    scan.cells.append(("drop", cell, gated))
                scan.removed.extend(cell.source.split("\n"))
            elif SOLUTION_TAG in tags:  # a solution cell outside any dropdown
                label = f"solution-cell-{len(scan.cells)}"
                kinds[label] = "coding"
                pending_label = label
                scan.cells.append(("stub", cell, label))
                scan.removed.extend(cell.source.split("\n"))
            else:
                if CHECK_TAG in tags:
                    call = _check_call(cell.source)
                    if call is not None:
                        label = pending_label or call[0]
                        kinds[label] = "coding"
                        checks[label] = call
                        pending_label = None
                scan.cells.append(("keep", cell, None))
        else:
            scan.cells.append(("keep", cell, None))

    order = list(dict.fromkeys(labels_seen + list(kinds)))
    for label in order:
        if label not in kinds:
            continue  # an exercise with no solution: nothing to grade or remove
        check_id, answer = checks.get(label, (None, None))
        scan.exercises.append(Exercise(label, kinds[label], check_id, answer))
    return scan


def chapter_notebook(path: str | os.PathLike):
    """Read a chapter (Jupytext MyST ``.md``, or ``.ipynb``) as an nbformat v4 notebook.

    Raises:
        ValueError: ``path`` does not exist or is not ``.md``/``.ipynb``.
    """
    import jupytext

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"path: no chapter file {path}")
    if path.suffix not in (".md", ".ipynb"):
        raise ValueError(f"path: expected a .md or .ipynb chapter, got {path.name}")
    return jupytext.read(path)


def exercises(nb) -> list[Exercise]:
    """The exercises of a chapter notebook, in order, following the course's convention.

    A gated or plain solution block makes an exercise; it is ``"coding"`` when it holds a
    ``solution``-tagged code cell (its check id and answer expression come from the next
    ``check``-tagged cell's ``check("id", answer)`` call), ``"derivation"`` otherwise.

    Args:
        nb: an nbformat v4 notebook (from :func:`chapter_notebook`).

    Returns:
        A list of :class:`Exercise`.

    Example:
        >>> [e.check_id for e in exercises(chapter_notebook("chapters/setup.md"))
        ...  if e.kind == "coding"]  # doctest: +SKIP
        ['setup/symmetrize']
    """
    return _scan(nb).exercises


def _names_assigned(target) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Tuple | ast.List):
        return [n for elt in target.elts for n in _names_assigned(elt)]
    if isinstance(target, ast.Starred):
        return _names_assigned(target.value)
    return []


def stub_source(source: str, exercise: str) -> str:
    """The student's stub for a solution cell: same names, no solution.

    Each top-level ``def`` keeps its name and signature and raises ``NotImplementedError``
    naming the exercise; each top-level name assigned becomes ``todo(exercise)``; imports are
    kept (without comments); everything else (docstrings, bodies, prints) is dropped.

    Args:
        source: the solution cell's Python source.
        exercise: the exercise id named in the error (``"setup/symmetrize"``).

    Returns:
        Python source of the stub (always valid Python).

    Example:
        >>> print(stub_source("def square(x):\\n    return x * x", "demo/square").strip())
        # Exercise demo/square: replace the stub(s) below by your solution.
        def square(x):
            raise NotImplementedError('exercise demo/square: write square')
    """
    head = f"# Exercise {exercise}: replace the stub(s) below by your solution."
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return head + "\n"
    out = [head]
    needs_todo = False
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            out.append(ast.unparse(node))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
            returns = f" -> {ast.unparse(node.returns)}" if node.returns else ""
            message = f"exercise {exercise}: write {node.name}"
            out.append(f"{prefix} {node.name}({ast.unparse(node.args)}){returns}:\n"
                       f"    raise NotImplementedError({message!r})")
        elif isinstance(node, ast.ClassDef):
            message = f"exercise {exercise}: write {node.name}"
            out.append(f"class {node.name}:\n    def __init__(self, *args, **kwargs):\n"
                       f"        raise NotImplementedError({message!r})")
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for name in dict.fromkeys(n for t in targets for n in _names_assigned(t)):
                out.append(f"{name} = todo({exercise!r})")
                needs_todo = True
    if needs_todo:
        out.insert(1, "from homework.edition import todo")
    return "\n".join(out) + "\n"


def _exercise_id(scan: _Scan, label: str) -> str:
    for ex in scan.exercises:
        if ex.label == label:
            return ex.check_id or label
    return label


def _placeholder_text(label: str, kind: str) -> str:
    if kind == "coding":
        return (f"*Solution of `{label}` removed: complete the stub in the next code cell, then "
                "run the check after it.*")
    return f"*Solution of `{label}` removed: write your own derivation here.*"


def _student_cells(nb):
    import nbformat

    scan = _scan(nb)
    cells = []
    for action, cell, *info in scan.cells:
        if action == "keep":
            cells.append(cell)
        elif action == "markdown":
            source, placeholders = info
            lines = source.split("\n")
            kinds = {e.label: e.kind for e in scan.exercises}
            for pos, label in reversed(placeholders):
                text = _placeholder_text(label, kinds.get(label, "derivation"))
                lines.insert(pos, "\n" + text + "\n")
            text = "\n".join(lines).strip("\n")
            if text.strip():
                cells.append(nbformat.v4.new_markdown_cell(text, metadata=cell.metadata))
        elif action == "stub":
            label = info[0]
            ex_id = _exercise_id(scan, label)
            metadata = dict(cell.metadata)
            metadata["tags"] = sorted(_tags(cell))  # keeps "solution": students answer there
            metadata["homework"] = {"exercise": ex_id, "role": "stub"}
            cells.append(nbformat.v4.new_code_cell(stub_source(cell.source, ex_id),
                                                   metadata=metadata))
        # "drop": removed
    return cells, scan


def solution_snippets(nb) -> list[str]:
    """Lines of every solution of a chapter that a student edition must not contain.

    Only distinctive lines are returned: at least 12 characters once normalized (markup and
    whitespace removed, see :func:`find_leaks`) and not also present in the part of the
    chapter students receive.
    """
    cells, scan = _student_cells(nb)
    kept = _normalize("\n".join(c.source for c in cells))
    out = []
    for line in scan.removed:
        norm = _normalize(line)
        if len(norm) >= 12 and norm not in kept and not _DIRECTIVE_LINE.match(line.strip()):
            out.append(line.strip())
    return list(dict.fromkeys(out))


_DIRECTIVE_LINE = re.compile(r"^(`{3,}|:{3,})\s*(\{[\w-]+\}.*)?$|^:[\w-]+:")


def _normalize(text: str, *, is_html: bool = False) -> str:
    """Text with markup and all whitespace removed: what survives markdown/HTML rendering
    (syntax highlighting splits a code line into tags with spaces between them).

    Tags are stripped only from HTML (``is_html=True``), where a literal ``<`` is always
    escaped; in sources ``x < 4 ... a -> b`` is code, not a tag."""
    if is_html:
        text = re.sub(r"<[^>]*>", "", text)
        text = html.unescape(text)
    text = re.sub(r"\\[()\[\]]", "", text)
    text = re.sub(r"[`*_$]", "", text)
    return "".join(text.split())


def _student_edition_class():
    from nbconvert.preprocessors import ClearOutputPreprocessor, Preprocessor
    from traitlets import Unicode

    class StudentEdition(Preprocessor):
        """nbconvert preprocessor making the student notebook of a chapter.

        Coding solutions become stubs (:func:`stub_source`, tagged ``solution`` and with
        ``metadata.homework.exercise``), other solution cells and derivation text are removed
        (a short sentence says where the answer goes), check cells and the rest of the chapter
        stay; outputs are cleared. The notebook's ``metadata.homework`` records the chapter and
        its coding exercises, which :func:`grade` reads when no chapter is given.

        Example:
            >>> nb, _ = StudentEdition(chapter="setup").preprocess(
            ...     chapter_notebook("chapters/setup.md"), {})  # doctest: +SKIP
        """

        chapter = Unicode("", help="the chapter's name, recorded in the notebook").tag(
            config=True)

        def preprocess(self, nb, resources):
            cells, scan = _student_cells(nb)
            nb.cells = cells
            nb.metadata["homework"] = {
                "chapter": self.chapter,
                "exercises": [e.check_id for e in scan.exercises if e.check_id],
            }
            nb.metadata.pop("jupytext", None)
            return ClearOutputPreprocessor().preprocess(nb, resources)

    StudentEdition.__module__, StudentEdition.__qualname__ = __name__, "StudentEdition"
    return StudentEdition


def __getattr__(name):
    # ``StudentEdition`` subclasses nbconvert's Preprocessor; it is made on first use so that
    # ``import lib`` (in every student kernel) does not import nbconvert.
    if name == "StudentEdition":
        cls = _student_edition_class()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def student_notebook(path: str | os.PathLike):
    """The student notebook of the chapter at ``path`` (see ``StudentEdition``)."""
    import copy

    nb = copy.deepcopy(chapter_notebook(path))
    nb, _ = __getattr__("StudentEdition")(chapter=Path(path).stem).preprocess(nb, {})
    return nb


# --------------------------------------------------------------------------------------------
# The book: chapters in the table of contents, student notebooks, student site
# --------------------------------------------------------------------------------------------


def toc_chapters(root: str | os.PathLike = ROOT) -> list[Path]:
    """Chapter files (``chapters/*.md``) named in ``root/_toc.yml``, in book order."""
    import yaml

    root = Path(root)
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    files: list[Path] = []

    def walk(node):
        if isinstance(node, dict):
            if "file" in node and str(node["file"]).startswith("chapters/"):
                files.append(root / (str(node["file"]) + ".md"))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(toc)
    return files


def resolve_chapter(name: str, root: str | os.PathLike = ROOT) -> Path:
    """The chapter file for ``name`` (``setup``, ``chapters/setup`` or a path to the file).

    Raises:
        ValueError: no such chapter.
    """
    root = Path(root)
    candidates = [Path(name), root / name, root / "chapters" / name]
    for c in list(candidates):
        candidates.append(c.with_suffix(".md"))
    for c in candidates:
        if c.is_file() and c.suffix in (".md", ".ipynb"):
            return c.resolve()
    known = [p.stem for p in toc_chapters(root)]
    raise ValueError(f"chapter: no chapter {name!r}; the book has {known}")


def write_student_notebooks(chapters=None, out: str | os.PathLike | None = None,
                            root: str | os.PathLike = ROOT) -> list[Path]:
    """Write ``<out>/<chapter>.ipynb``, the student notebook of each chapter.

    Args:
        chapters: chapter names or paths (default: every chapter of ``_toc.yml`` that has
            code cells).
        out: output folder (default ``<root>/_build/student/notebooks``).
        root: the course root.

    Returns:
        The paths written.

    Raises:
        ValueError: an unknown chapter.
    """
    import nbformat

    root = Path(root)
    out = Path(out) if out is not None else root / "_build" / "student" / "notebooks"
    if chapters:
        paths = [resolve_chapter(c, root) for c in chapters]
    else:  # every chapter with code (a text-only page such as the instructors' has no use)
        paths = [p for p in toc_chapters(root)
                 if any(c.cell_type == "code" for c in chapter_notebook(p).cells)]
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for path in paths:
        nb = student_notebook(path)
        target = out / (path.stem + ".ipynb")
        nbformat.validate(nb)
        nbformat.write(nb, target)
        written.append(target)
    return written


def find_leaks(folder: str | os.PathLike, snippets: list[str], *,
               skip=lambda path: False) -> list[tuple[str, str]]:
    """``(file, snippet)`` for every snippet found in a text file under ``folder``.

    Text is compared after ``_normalize`` (tags, HTML entities, markdown and math markup
    and whitespace removed), so a solution line is found in rendered HTML as in a notebook.
    Files for which ``skip(path)`` is true are not searched.
    """
    folder = Path(folder)
    wanted = [(s, _normalize(s)) for s in snippets]
    hits = []
    for path in sorted(folder.rglob("*")):
        if skip(path):
            continue
        if not path.is_file() or path.suffix not in (".html", ".ipynb", ".js", ".md", ".txt",
                                                     ".py", ".json"):
            continue
        if "mathjax" in path.parts or path.name.endswith(".min.js"):
            continue
        text = path.read_text(errors="replace")
        if path.suffix == ".ipynb":
            try:
                data = json.loads(text)
                text = "\n".join("".join(c.get("source", "")) for c in data.get("cells", []))
            except (ValueError, AttributeError):
                pass
        norm = _normalize(text, is_html=path.suffix == ".html")
        for raw, s in wanted:
            if s and s in norm:
                hits.append((str(path), raw))
    return hits


def _lib_hash(root: Path) -> str:
    """Hash of what decides executed outputs besides a chapter's source (jupyter-cache does not
    see it): ``lib/`` and ``_ext/`` files, the book's configuration and the run switches, as
    ``scripts/build_book.py`` hashes them."""
    digest = hashlib.sha256()
    files = [p for tree in ("lib", "_ext") for p in (root / tree).rglob("*")
             if p.is_file() and "__pycache__" not in p.parts]
    files += [root / n for n in ("_config.yml", "_toc.yml", "references.bib", "requirements.txt")
              if (root / n).is_file()]
    for path in sorted(files):
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    for name in ("KRR_SEED", "KRR_FULL"):
        digest.update(f"{name}={os.environ.get(name, '')}\0".encode())
    return digest.hexdigest()


def student_config(root: str | os.PathLike = ROOT) -> dict:
    """The book's ``_config.yml`` with the student overrides: solutions hidden
    (sphinx-exercise's ``hide_solutions``, plus ``_ext/student_edition.py`` for gated ones),
    no copied sources and no download button (they would carry the solutions)."""
    import yaml

    root = Path(root)
    config = yaml.safe_load((root / "_config.yml").read_text()) or {}
    config["title"] = f"{config.get('title', 'Book')} (student edition)"
    config.setdefault("html", {})["use_download_button"] = False
    sphinx = config.setdefault("sphinx", {})
    local = dict(sphinx.get("local_extensions") or {})
    local = {name: str((root / path).resolve()) for name, path in local.items()}
    local["student_edition"] = str(ROOT / "_ext")  # the course's, whatever book is built
    sphinx["local_extensions"] = local
    sphinx.setdefault("config", {}).update(
        hide_solutions=True, html_copy_source=False, html_show_sourcelink=False)
    return config


def build_student_site(root: str | os.PathLike = ROOT, out: str | os.PathLike | None = None, *,
                       force: bool = False, strict: bool = False, check_leaks: bool = True,
                       quiet: bool = False) -> Path:
    """Build the student website (every solution removed) into ``<out>/html``.

    Runs ``jupyter-book build`` on the course with :func:`student_config` as ``--config`` and
    ``<out>/.work`` as output folder, then copies the HTML to ``<out>/html``. Every page is
    re-read (``--all``: an incremental Sphinx build would keep pages read before the student
    overrides); executed notebooks are cached in ``<out>/.work``, and the cache is cleared when
    ``lib/``, ``_ext/``, the configuration or ``KRR_SEED``/``KRR_FULL`` changed (it does not
    see such changes). The pages of an earlier build are removed first, so a failed build
    leaves no site, and a site with solution text is moved to ``<out>/html-failed``.

    Args:
        root: the course root.
        out: output folder (default ``<root>/_build/student``).
        force: re-execute every chapter (clear the execution cache).
        strict: pass ``-W`` (a warning fails the build).
        check_leaks: search the HTML for every line of every solution; raise if one is found.
        quiet: pass ``-q`` to jupyter-book.

    Returns:
        The HTML folder.

    Raises:
        RuntimeError: the build failed, or a solution line appears in the output.
    """
    import yaml

    root = Path(root).resolve()
    out = Path(out).resolve() if out is not None else root / "_build" / "student"
    work = out / ".work"
    work.mkdir(parents=True, exist_ok=True)
    stamp = work / ".lib-hash"
    current = _lib_hash(root) if (root / "lib").is_dir() else ""
    if force or not stamp.exists() or stamp.read_text() != current:
        shutil.rmtree(work / "_build" / ".jupyter_cache", ignore_errors=True)
    config_path = work / "_config.yml"
    config_path.write_text(yaml.safe_dump(student_config(root), sort_keys=False))
    exe = Path(sys.executable).parent / "jupyter-book"
    cmd = [str(exe) if exe.is_file() else "jupyter-book", "build", str(root), "--config",
           str(config_path), "--path-output", str(work), "--builder", "html", "-n",
           "--keep-going", "--all"]  # --all: re-read every page (execution stays cached)
    if strict:
        cmd.append("-W")
    if quiet:
        cmd.append("-q")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    built = work / "_build" / "html"
    target = out / "html"
    # no page of an earlier build may survive this one: a failed build leaves no site at all
    shutil.rmtree(built, ignore_errors=True)
    shutil.rmtree(target, ignore_errors=True)
    result = subprocess.run(cmd, cwd=root, env=env)
    if result.returncode != 0 or not built.is_dir():
        raise RuntimeError(f"the student site build failed (exit code {result.returncode})")
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(built, target)
    stamp.write_text(current)
    if check_leaks:  # a chapter's solutions, in its own page or in any file not a page
        leaks = []
        for chapter in toc_chapters(root):
            page = target / chapter.relative_to(root).with_suffix(".html")

            def other_page(path, page=page):
                return path.suffix == ".html" and path != page

            leaks += find_leaks(target, solution_snippets(chapter_notebook(chapter)),
                                skip=other_page)
        if leaks:
            listing = "\n".join(f"  {f}: {s}" for f, s in leaks[:20])
            shutil.rmtree(out / "html-failed", ignore_errors=True)
            target.rename(out / "html-failed")  # not publishable; kept to read
            raise RuntimeError(f"solution text found in the student site (moved to "
                               f"{out / 'html-failed'}):\n{listing}")
    return target
