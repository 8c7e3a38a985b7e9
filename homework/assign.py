"""``python -m homework.assign [CHAPTER ...] [--out DIR] [--no-run-tests]`` (``make assign``).

Writes each chapter's otter master notebook and runs ``otter assign`` on it (see
:func:`homework.otter.assign`); prints where the student folder and the autograder zip are.
"""

from __future__ import annotations

import argparse
import sys

from .otter import assign


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("chapters", nargs="*", help="chapter names (default: every chapter)")
    p.add_argument("--out", default=None, help="output folder (None: _build/assign)")
    p.add_argument("--no-run-tests", action="store_true",
                   help="do not let otter run the tests on the solutions (faster)")
    p.add_argument("--gradescope", nargs=2, metavar=("COURSE_ID", "MANUAL_ASSIGNMENT_ID"),
                   help="upload each submission's PDF of the manual questions to this "
                   "Gradescope assignment (otter asks for your Gradescope login)")
    a = p.parse_args(argv)
    failed = []
    for chapter in a.chapters or [None]:
        try:
            done = assign([chapter] if chapter else None, a.out, run_tests=not a.no_run_tests,
                          gradescope=a.gradescope)
        except (ValueError, RuntimeError) as err:
            print(f"assign: {err}", file=sys.stderr)
            failed.append(chapter or "all")
            continue
        for name, dist in done.items():
            zips = sorted((dist / "autograder").glob("*.zip"))
            print(f"{name}: student folder {dist / 'student'}; autograder "
                  f"{zips[-1] if zips else '(missing)'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
