"""Throughput of `make grade` without containers: N copies of a correct setup submission.

    python scripts/bench_grading.py [--n 10] [--jobs 2] [--no-cache] [--warm-from solution]

Needs `make assign CHAPTER=setup` first. Prints the wall time, the CPU time of the grading
processes (user + sys of every finished child: otter run, its kernel) per submission, and the
projection to 200 submissions on 2 idle cores (CPU time x 200 / 2), the figure quoted in
homework/DESIGN.md. Unless --no-cache, each submission's kernel starts from a private copy
of the JAX cache that one run of the handout compiled before the first submission (that run is
counted in the times, and also shown alone); --warm-from solution fills it with a run of the
solution notebook instead (for comparison only: `make grade` never does, as the cache entries
would hand the solutions' compiled code to the students).
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from homework import grade as hg  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=10)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--no-cache", action="store_true")
    p.add_argument("--warm-from", choices=["handout", "solution"], default="handout")
    a = p.parse_args(argv)
    dist = ROOT / "_build" / "assign" / "setup" / "dist"
    solved = next((dist / "autograder").glob("*.ipynb"))
    ag = next((dist / "autograder").glob("*.zip"))
    if a.warm_from == "solution":
        hg.trusted_notebook = lambda autograder, chapter: solved
    warm = {"cpu": 0.0, "wall": 0.0}
    fill = hg.warm_cache

    def timed_fill(*args, **kwargs):  # the warm-up alone (before the pool): its own times
        before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        try:
            return fill(*args, **kwargs)
        finally:
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            warm["wall"] = time.perf_counter() - start
            warm["cpu"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

    hg.warm_cache = timed_fill
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "subs"
        folder.mkdir()
        for i in range(a.n):
            shutil.copy(solved, folder / f"student{i:03d}.ipynb")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        rows, _ = hg.grade(folder, out=Path(tmp) / "grades", autograder=ag, docker="no",
                           jobs=a.jobs, cache=not a.no_cache)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    full = sum(1 for r in rows if r.status == "graded" and r.total == 8.0)
    result = {"n": a.n, "jobs": a.jobs, "cache": not a.no_cache,
              "warm_from": None if a.no_cache else a.warm_from, "full_marks": full,
              "wall_s": round(wall, 1), "wall_per_submission_s": round(wall / a.n, 1),
              "cpu_per_submission_s": round(cpu / a.n, 1),
              "warm_up_wall_s": round(warm["wall"], 1), "warm_up_cpu_s": round(warm["cpu"], 1),
              "cpu_per_submission_without_warm_up_s": round((cpu - warm["cpu"]) / a.n, 1),
              "median_row_s": round(sorted(r.seconds for r in rows)[len(rows) // 2], 1),
              "projected_200_on_2_idle_cores_min": round(cpu / a.n * 200 / 2 / 60, 1)}
    print(json.dumps(result, indent=1))
    return 0 if full == a.n else 1


if __name__ == "__main__":
    sys.exit(main())
