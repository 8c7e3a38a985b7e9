"""Make the student edition of the course: the website and the notebooks, without solutions.

    python scripts/student.py                 # both, for every chapter of _toc.yml
    python scripts/student.py site            # _build/student/html: the book, solutions removed
    python scripts/student.py notebooks       # _build/student/notebooks/<chapter>.ipynb
    python scripts/student.py notebooks setup --out handout/

In a student notebook each coding solution is a stub raising NotImplementedError that names the
exercise, derivation solutions are removed and the check cells stay, so run top to bottom every
check says "not attempted", "fails (hint: ...)" or "passes". Their Markdown is converted from
MyST to plain Jupyter Markdown (math, theorem boxes, citations) like every notebook the course
hands out. Both outputs are searched for every line of every solution; a line found there fails
the command. See chapters/instructors.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from homework import edition as homework  # noqa: E402

sys.path.insert(0, str(ROOT / "_ext"))
import myst_to_jupyter  # noqa: E402  (MyST -> plain Jupyter Markdown, as the downloads)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", nargs="?", choices=["all", "site", "notebooks"], default="all")
    parser.add_argument("chapters", nargs="*",
                        help="notebooks only: chapter names (default: every chapter)")
    parser.add_argument("--out", type=Path, default=None,
                        help="output folder (default: _build/student, notebooks in "
                             "_build/student/notebooks)")
    parser.add_argument("--force", action="store_true", help="site: re-execute every chapter")
    parser.add_argument("--strict", action="store_true", help="site: a warning fails the build")
    args = parser.parse_args(argv)
    if args.chapters and args.what != "notebooks":
        parser.error("chapters can only be chosen for 'notebooks'")

    out = args.out
    if args.what in ("all", "notebooks"):
        folder = (out / "notebooks" if args.what == "all" else out) if out else None
        written = homework.write_student_notebooks(args.chapters or None, folder, ROOT)
        snippets = [s for c in (args.chapters or homework.toc_chapters(ROOT))
                    for s in homework.solution_snippets(
                        homework.chapter_notebook(homework.resolve_chapter(str(c), ROOT)))]
        leaks = [hit for p in written for hit in homework.find_leaks(p.parent, snippets)
                 if hit[0] == str(p)]
        if leaks:
            for f, s in leaks:
                print(f"solution text in {f}: {s}", file=sys.stderr)
            return 1
        numbers = myst_to_jupyter.chapter_numbers(ROOT)
        for p in written:
            myst_to_jupyter.convert_file(p, bib_files=[ROOT / "references.bib"],
                                         chapter=numbers.get(p.stem))
            print(f"wrote {p}")
    if args.what in ("all", "site"):
        try:
            html = homework.build_student_site(ROOT, out, force=args.force, strict=args.strict)
        except RuntimeError as err:
            print(err, file=sys.stderr)
            return 1
        print(f"\nThe student site is in {html}; open {html / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
