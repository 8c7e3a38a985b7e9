"""Grade a folder of submissions with otter-grader: CSV of per-question points, feedback files.

``python -m homework.grade SUBMISSIONS [--chapter setup] [--out grades/]`` (``make grade``).

* Submissions: ``.ipynb`` files in any letter case, flat or in per-student subfolders (the
  subfolder names the student), and otter's zip exports (the notebook inside the zip).
* Engine: ``otter grade`` in Docker when a Docker daemon answers (``--docker auto``, the
  default), otherwise ``otter run`` with the autograder zip of ``make assign``, one submission
  at a time per job, each in its own session (process group), with a wall-time limit, a memory
  limit (``RLIMIT_AS``), an output cap and a per-cell time limit that interrupts the cell and
  goes on to the next; afterwards every process the submission started is killed, including
  those that left the group (they are found by a token in their environment).
* Output: ``<out>/grades.csv`` (student, file, chapter, status, total, possible, one column per
  question) and ``<out>/feedback/<student>.md`` (per-question points and messages).
* Exit status 2 with a message when nothing gradable is found or every input is unreadable.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOKEN_VAR = "KRR_GRADE_TOKEN"


class GradeError(Exception):
    """A problem with the inputs that stops grading (message for the instructor)."""


@dataclass
class Submission:
    student: str
    path: Path  # the notebook (extracted from a zip when needed)
    origin: Path  # the file as handed in
    nb: object = None
    chapter: str | None = None
    error: str | None = None


@dataclass
class Row:
    student: str
    file: str
    chapter: str
    status: str = "graded"
    scores: dict = field(default_factory=dict)  # question -> (score, possible)
    messages: dict = field(default_factory=dict)  # question -> feedback text
    notes: str = ""
    seconds: float = 0.0

    @property
    def total(self):
        return round(sum(s for s, _ in self.scores.values()), 6)


# --------------------------------------------------------------------------------------------
# Collecting submissions
# --------------------------------------------------------------------------------------------


def _is_notebook(p: Path) -> bool:
    return p.is_file() and p.suffix.lower() == ".ipynb"


def _skip(p: Path, root: Path) -> bool:
    parts = p.relative_to(root).parts if p != root else ()
    return any(part.startswith(".") or part == "__MACOSX" for part in parts)


def collect(folder: str | os.PathLike, work: Path) -> list[Submission]:
    """The submissions under ``folder`` (a folder or one file); zips are extracted into ``work``.

    Raises:
        GradeError: ``folder`` does not exist or holds no ``.ipynb``/``.zip`` file.
    """
    root = Path(folder)
    if not root.exists():
        raise GradeError(f"SUBMISSIONS: {root} does not exist")
    files = [root] if root.is_file() else sorted(
        p for p in root.rglob("*") if p.is_file() and not _skip(p, root)
        and p.suffix.lower() in (".ipynb", ".zip"))
    if not files:
        raise GradeError(f"SUBMISSIONS: no submission in {root} (expected .ipynb files, in any "
                         "letter case, flat or in one subfolder per student, or otter zip "
                         "exports)")
    subs: list[Submission] = []
    for p in files:
        rel = p.relative_to(root) if p != root else Path(p.name)
        student = rel.parts[0] if len(rel.parts) > 1 else re.sub(r"\.(ipynb|zip)$", "", p.name,
                                                                  flags=re.I)
        if p.suffix.lower() == ".zip":
            try:
                with zipfile.ZipFile(p) as z:
                    names = [n for n in z.namelist() if n.lower().endswith(".ipynb")
                             and not Path(n).name.startswith(".") and "__MACOSX" not in n]
                    if not names:
                        subs.append(Submission(student, p, p, error="zip without a notebook"))
                        continue
                    dest = work / "unzipped" / f"{len(subs)}"
                    dest.mkdir(parents=True)
                    target = dest / Path(names[0]).name
                    target.write_bytes(z.read(names[0]))
                    subs.append(Submission(student, target, p))
            except (zipfile.BadZipFile, OSError) as err:
                subs.append(Submission(student, p, p, error=f"unreadable zip ({err})"))
        else:
            subs.append(Submission(student, p, p))
    # one row per student: a name seen twice gets a suffix
    seen: dict[str, int] = {}
    for s in subs:
        n = seen.get(s.student, 0)
        seen[s.student] = n + 1
        if n:
            s.student = f"{s.student}-{n + 1}"
    return subs


def notebook_chapter(nb) -> str | None:
    """The chapter a homework notebook belongs to (its metadata), or None."""
    md = nb.get("metadata", {})
    for getter in (lambda: md["homework"]["chapter"], lambda: md["otter"]["assignment_name"]):
        try:
            value = getter()
        except (KeyError, TypeError):
            continue
        if isinstance(value, str) and value:
            return value
    return None


def read_all(subs: list[Submission]) -> None:
    import warnings

    import nbformat

    # notebooks made by hand or by older tools lack cell ids; nbformat adds them (and warns)
    warnings.filterwarnings("ignore", message="Cell is missing an id field")

    for s in subs:
        if s.error:
            continue
        try:
            s.nb = nbformat.read(s.path, as_version=4)
        except Exception as err:  # noqa: BLE001 (any unreadable file is reported, not fatal)
            s.error = f"unreadable notebook ({type(err).__name__}: {str(err)[:120]})"
            continue
        s.chapter = notebook_chapter(s.nb)


# --------------------------------------------------------------------------------------------
# Running one submission without containers
# --------------------------------------------------------------------------------------------

LIMITS_CELL = r'''
# Added by the course's grader (homework/grade.py): per-cell time limit and output cap.
def _krr_grader_limits(limit={cell_timeout}, cap={output_cap}):
    import signal, sys
    class CellTimeLimit(BaseException):
        """Raised in a cell that ran longer than the per-cell limit (not a KeyboardInterrupt)."""
    def alarm(signum, frame):
        raise CellTimeLimit(f"cell stopped by the grader after {{limit}} s")
    ip = get_ipython()
    def pre(info=None):
        src = getattr(info, "raw_cell", "") or ""
        if "otter" in src and (".check(" in src or "GradingResults" in src or "Checker" in src):
            return  # otter's own grading cells: no limit
        signal.signal(signal.SIGALRM, alarm)
        signal.setitimer(signal.ITIMER_REAL, limit, 0.5)
    def post(result=None):
        signal.setitimer(signal.ITIMER_REAL, 0)
    ip.events.register("pre_run_cell", pre)
    ip.events.register("post_run_cell", post)
    class Capped:
        def __init__(self, stream):
            self._s, self._n, self._warned = stream, 0, False
        def write(self, text):
            self._n += len(text)
            if self._n <= cap:
                return self._s.write(text)
            if not self._warned:
                self._warned = True
                self._s.write("\n[output truncated by the grader]\n")
            return len(text)
        def __getattr__(self, name):
            return getattr(self._s, name)
    sys.stdout, sys.stderr = Capped(sys.stdout), Capped(sys.stderr)
_krr_grader_limits()
del _krr_grader_limits
'''


def _limited_copy(sub: Submission, dest: Path, chapter: str, cell_timeout: float,
                  output_cap: int) -> Path:
    import copy

    import nbformat

    nb = copy.deepcopy(sub.nb)
    cell = nbformat.v4.new_code_cell(LIMITS_CELL.format(cell_timeout=cell_timeout,
                                                        output_cap=output_cap))
    nb.cells.insert(0, cell)
    for c in nb.cells:  # stale outputs are not graded and only cost memory
        if c.cell_type == "code":
            c.outputs, c.execution_count = [], None
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / f"{chapter}.ipynb"
    nbformat.write(nb, path)
    return path


def _kill_tagged(token: str) -> int:
    """Kill every process whose environment holds ``KRR_GRADE_TOKEN=token``; how many."""
    needle = f"{TOKEN_VAR}={token}".encode()
    killed = 0
    for _ in range(3):
        found = 0
        for d in Path("/proc").iterdir():
            if not d.name.isdigit() or int(d.name) == os.getpid():
                continue
            try:
                env = (d / "environ").read_bytes()
            except OSError:
                continue
            if needle in env.split(b"\0"):
                try:
                    os.kill(int(d.name), signal.SIGKILL)
                    found += 1
                except OSError:
                    pass
        killed += found
        if not found:
            break
        time.sleep(0.2)
    return killed


def run_local(sub: Submission, chapter: str, autograder: Path, work: Path, *, timeout: float,
              cell_timeout: float, memory: int, output_cap: int, cache_dir: Path | None) -> Row:
    """Grade one submission with ``otter run`` in its own session, with limits."""
    row = Row(sub.student, str(sub.origin), chapter)
    token = secrets.token_hex(8)
    box = work / f"run-{token}"
    nb_path = _limited_copy(sub, box / "in", chapter, cell_timeout, output_cap)
    out = box / "out"
    out.mkdir()
    env = dict(os.environ)
    env[TOKEN_VAR] = token
    env.pop("KRR_FULL", None)
    env["PYTHONPATH"] = ""  # the submission imports lib from the autograder's copy
    env["MPLBACKEND"] = "Agg"
    if cache_dir is not None:  # XLA compilations shared between submissions
        env["JAX_COMPILATION_CACHE_DIR"] = str(cache_dir)
        env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
        env["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"

    def limits():
        if memory:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    log = box / "otter.log"
    start = time.perf_counter()
    with open(log, "wb") as logf:
        proc = subprocess.Popen(
            [sys.executable, "-m", "otter", "run", "-a", str(autograder), "-o", str(out),
             "--no-logo", str(nb_path)],
            cwd=box, env=env, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, preexec_fn=limits)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            row.notes = f"stopped after the total limit of {timeout:.0f} s"
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            _kill_tagged(token)
    row.seconds = time.perf_counter() - start
    results = out / "results.json"
    if not results.is_file():
        tail = log.read_bytes()[-600:].decode(errors="replace")
        row.status = "error"
        row.notes = (row.notes or "otter run gave no result") + f"; last output: {tail!r}"
        return row
    _fill_from_results(row, json.loads(results.read_text()))
    return row


def _fill_from_results(row: Row, data: dict) -> None:
    """Per-question points from otter's (Gradescope-format) results.json."""
    for test in data.get("tests", []):
        name = str(test.get("name", ""))
        q = re.sub(r"\s*\((Public|Hidden).*$", "", name).split(" - ")[0].strip()
        if not q or q == "Public Tests" or test.get("max_score") is None:
            continue  # otter's summary entry, not a question
        score = float(test.get("score") or 0.0)
        possible = float(test.get("max_score") or 0.0)
        old = row.scores.get(q, (0.0, 0.0))
        row.scores[q] = (old[0] + score, old[1] + possible)
        text = str(test.get("output") or "").strip()
        if text:
            row.messages[q] = (row.messages.get(q, "") + "\n" + text).strip()


# --------------------------------------------------------------------------------------------
# Docker path
# --------------------------------------------------------------------------------------------


def docker_available() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def docker_arguments(folder: Path, autograder: Path, out: Path, timeout: float,
                     jobs: int) -> list[str]:
    """The arguments of ``otter grade`` (otter 7: the submissions' folder is positional), with
    networking off in the containers."""
    return [str(folder), "-a", str(autograder), "-o", str(out), "--ext", "ipynb",
            "--timeout", str(int(timeout)), "--containers", str(jobs), "--no-network"]


def run_docker(subs: list[Submission], chapter: str, autograder: Path, work: Path,
               timeout: float, jobs: int) -> list[Row]:
    """``otter grade`` (one container per submission) on a folder of the notebooks."""
    folder = work / "docker-in"
    folder.mkdir()
    names = {}
    for s in subs:
        target = folder / f"{s.student}.ipynb"
        shutil.copy(s.path, target)
        names[target.stem] = s
    out = work / "docker-out"
    proc = subprocess.run([sys.executable, "-m", "otter", "grade",
                           *docker_arguments(folder, autograder, out, timeout, jobs)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise GradeError(f"otter grade failed:\n{proc.stdout}\n{proc.stderr}")
    rows = []
    with open(out / "final_grades.csv") as f:
        for rec in csv.DictReader(f):
            stem = Path(rec.get("file", "")).stem
            s = names.get(stem)
            row = Row(s.student if s else stem, str(s.origin) if s else stem, chapter)
            for k, v in rec.items():
                if k not in ("file", "total", "possible", "percent_correct", "grading_status"):
                    row.scores[k] = (float(v or 0), float("nan"))
            rows.append(row)
    return rows


# --------------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------------


def find_autograder(chapter: str) -> Path:
    found = sorted((ROOT / "_build" / "assign" / chapter / "dist" / "autograder").glob(
        "*autograder*.zip"))
    if not found:
        raise GradeError(f"no autograder zip for {chapter}: run `make assign` first (or pass "
                         "--autograder)")
    return found[-1]


def write_outputs(rows: list[Row], out: Path, questions: list[str]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    csv_path = out / "grades.csv"
    with open(csv_path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student", "file", "chapter", "status", "total", "possible", *questions,
                    "notes"])
        for r in rows:
            possible = sum(p for _, p in r.scores.values()) if r.scores else ""
            w.writerow([r.student, r.file, r.chapter, r.status, r.total if r.scores else 0,
                        possible, *[r.scores.get(q, (0.0, 0.0))[0] for q in questions],
                        r.notes])
    fb = out / "feedback"
    fb.mkdir(exist_ok=True)
    for r in rows:
        lines = [f"# Feedback: {r.student} ({r.chapter})", "",
                 f"Status: {r.status}. Points: {r.total if r.scores else 0}"
                 + (f" / {sum(p for _, p in r.scores.values())}" if r.scores else ""), ""]
        if r.notes:
            lines += [f"Notes: {r.notes}", ""]
        for q in questions:
            s, p = r.scores.get(q, (0.0, 0.0))
            lines.append(f"## {q}: {s:g} / {p:g}")
            msg = r.messages.get(q, "")
            if msg:
                lines += ["", "```", msg[:3000], "```"]
            lines.append("")
        (fb / f"{r.student}.md").write_text("\n".join(lines))
    return csv_path


def grade(folder, *, chapter: str | None = None, out: str | os.PathLike = "grades",
          autograder: str | os.PathLike | None = None, docker: str = "auto", jobs: int = 1,
          timeout: float = 600, cell_timeout: float = 60, memory_gb: float = 6,
          output_mb: float = 20, cache: bool = True) -> tuple[list[Row], Path]:
    """Grade the submissions in ``folder``; write the CSV and the feedback files under ``out``.

    Raises:
        GradeError: no submission, every input unreadable, an unknown chapter or no autograder.
    """
    out = Path(out)
    work = Path(tempfile.mkdtemp(prefix="krr-grade-"))
    try:
        subs = collect(folder, work)
        read_all(subs)
        readable = [s for s in subs if s.error is None]
        if not readable:
            raise GradeError("SUBMISSIONS: every input is unreadable: " + "; ".join(
                f"{s.origin}: {s.error}" for s in subs))
        if chapter is None:
            named = [s.chapter for s in readable if s.chapter]
            if not named:
                raise GradeError("no submission names its chapter: pass CHAPTER=<chapter>")
            chapter = max(set(named), key=named.count)
        ag = Path(autograder) if autograder else find_autograder(chapter)
        with zipfile.ZipFile(ag) as z:
            questions = sorted({Path(n).stem for n in z.namelist()
                                if n.startswith("tests/") and n.endswith(".py")})
        rows: list[Row] = []
        todo: list[Submission] = []
        for s in subs:
            if s.error:
                rows.append(Row(s.student, str(s.origin), chapter, "unreadable", notes=s.error))
            elif s.chapter and s.chapter != chapter:
                rows.append(Row(s.student, str(s.origin), chapter, "wrong chapter",
                                notes=f"this is the notebook of chapter {s.chapter!r}, not "
                                      f"{chapter!r}: not graded (grade it with CHAPTER="
                                      f"{s.chapter})"))
            else:
                todo.append(s)
        use_docker = docker == "yes" or (docker == "auto" and docker_available())
        if use_docker and todo:
            rows += run_docker(todo, chapter, ag, work, timeout, jobs)
        else:
            cache_dir = ROOT / "_build" / "grade-cache" / "jax" if cache else None
            if cache_dir:
                cache_dir.mkdir(parents=True, exist_ok=True)

            def one(s):
                row = run_local(s, chapter, ag, work, timeout=timeout, cell_timeout=cell_timeout,
                                memory=int(memory_gb * 2**30), output_cap=int(output_mb * 2**20),
                                cache_dir=cache_dir)
                print(f"{row.student}: {row.status} {row.total:g} "
                      f"({row.seconds:.1f} s){' - ' + row.notes[:100] if row.notes else ''}",
                      flush=True)
                return row

            with ThreadPoolExecutor(max(1, jobs)) as pool:
                rows += list(pool.map(one, todo))
        rows.sort(key=lambda r: r.student)
        return rows, write_outputs(rows, out, questions)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("submissions", help="a folder (flat, per-student subfolders, zips) or a file")
    p.add_argument("--chapter", help="chapter to grade against (default: the one the "
                   "notebooks name)")
    p.add_argument("--out", default="grades", help="folder for grades.csv and feedback/")
    p.add_argument("--autograder", help="autograder zip (default: the one of make assign)")
    p.add_argument("--docker", choices=["auto", "yes", "no"], default="auto")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--timeout", type=float, default=600, help="seconds per submission")
    p.add_argument("--cell-timeout", type=float, default=60, help="seconds per cell")
    p.add_argument("--memory-gb", type=float, default=6, help="address-space limit")
    p.add_argument("--output-mb", type=float, default=20, help="printed output kept per stream")
    p.add_argument("--no-cache", action="store_true", help="no shared JAX compilation cache")
    a = p.parse_args(argv)
    try:
        rows, csv_path = grade(a.submissions, chapter=a.chapter, out=a.out,
                               autograder=a.autograder, docker=a.docker, jobs=a.jobs,
                               timeout=a.timeout, cell_timeout=a.cell_timeout,
                               memory_gb=a.memory_gb, output_mb=a.output_mb,
                               cache=not a.no_cache)
    except GradeError as err:
        print(f"grade: {err}", file=sys.stderr)
        return 2
    print(f"{len(rows)} submissions -> {csv_path} and {csv_path.parent / 'feedback'}/")
    return 0 if any(r.status == "graded" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
