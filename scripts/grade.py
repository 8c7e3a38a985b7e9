"""Grade submitted notebooks: one CSV row per student, one score and reason per exercise.

    python scripts/grade.py submissions/                       # chapter read from each notebook
    python scripts/grade.py submissions/*.ipynb --chapter setup --out grades/setup.csv
    python scripts/grade.py submissions/ --cell-timeout 60 --timeout 600 --jobs 2

Each submission runs in a fresh kernel process inside its own temporary directory, with a
time limit per cell (--cell-timeout) and for all its cells (--timeout); then the grader runs the
chapter's own check of every coding exercise. A submission that raises, loops, lost a cell,
renamed a function or is not valid JSON still gets a row, with 0 and the reason for what it
breaks. Writes the CSV (default grades.csv) and a Markdown summary next to it
(grades-summary.md), and prints the summary. See chapters/instructors.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lib import homework  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("submissions", nargs="+", type=Path,
                        help="submitted .ipynb files, or folders holding them")
    parser.add_argument("--chapter", default=None,
                        help="chapter name (default: read from each student notebook)")
    parser.add_argument("--out", type=Path, default=Path("grades.csv"), help="CSV to write")
    parser.add_argument("--cell-timeout", type=float, default=60, help="seconds per cell")
    parser.add_argument("--timeout", type=float, default=600,
                        help="seconds for all the cells of one submission")
    parser.add_argument("--jobs", type=int, default=1, help="submissions graded at once")
    args = parser.parse_args(argv)

    def progress(row):
        print(f"{row.student}: {row.score}/{row.max_score}"
              + (f"  [{row.notes}]" if row.notes else ""), flush=True)

    try:
        rows = homework.grade(args.submissions, args.chapter, root=ROOT,
                              cell_timeout=args.cell_timeout, total_timeout=args.timeout,
                              jobs=args.jobs, progress=progress)
    except ValueError as err:
        parser.error(str(err))
    csv_path, summary = homework.write_grades(rows, args.out)
    print()
    print(summary.read_text())
    print(f"Scores in {csv_path}, summary in {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
