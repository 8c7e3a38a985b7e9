"""Run every chapter under other seeds (``make seeds``) or at the papers' size (``make full``).

Every chapter takes all its randomness from ``KRR_SEED`` and its size from ``KRR_FULL`` (see
:mod:`lib.config`), and records its checked claims with :func:`lib.claims.record`. This script
runs the chapters under other values of those switches and collects the records:

    python scripts/sweeps.py seeds [--seeds 1 2 3 4] [-k NAME] [--record]
        Executes each chapter (default size) once per seed, the claims of seed s going to
        ``_build/seeds/seed<s>/``. Prints, per claim, how many seeds passed and the range of the
        measured value (seed 0 is taken from the last ``make book``/``make test`` records in
        ``_build/claims`` unless it is in ``--seeds``). Exits 1 if a chapter fails or a claim
        fails under any seed.

    python scripts/sweeps.py full [-k NAME] [--record]
        Builds the whole book with ``KRR_FULL=1`` (every chapter executed at the papers' size,
        no per-cell time limit) into ``_build/full/html``, its claims into ``_build/full/claims``,
        prints each chapter's wall time and exits 1 if any cell fails or the build warns.

``--record`` copies the records into ``results/seeds/`` or ``results/full/`` (small JSON files
meant to be committed) with the commit, the date and the times of the run; the book's claims
ledger shows them next to this build's values and marks a row *stale* when its chapter or
``lib/`` changed after the recorded run.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import jupytext
import yaml
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from homework.edition import toc_chapters  # noqa: E402

sys.path.insert(0, str(ROOT / "scripts"))
from build_book import kernel_env  # noqa: E402  (kernels log only errors, as in the build)

BUILD = ROOT / "_build"
RESULTS = ROOT / "results"


def git_state(chapters: list[Path]) -> dict:
    """The commit of the run and whether the chapters or ``lib/`` differ from it."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)

    head = git("rev-parse", "HEAD")
    commit = head.stdout.strip() if head.returncode == 0 else None
    paths = ["lib", *(str(p.relative_to(ROOT)) for p in chapters)]
    dirty = git("status", "--porcelain", "--", *paths)
    return {"commit": commit, "dirty": bool(dirty.stdout.strip()) if commit else None}


def execute(path: Path, env: dict[str, str], timeout: int | None) -> tuple[float, str | None]:
    """Execute one chapter in a fresh ``python3`` kernel with ``env`` added to the environment.

    Returns the wall time in seconds and ``None``, or the error's last line if a cell failed.
    """
    notebook = jupytext.read(path)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the kernel inherits this process's environment at start
    try:
        client = NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                                resources={"metadata": {"path": str(path.parent)}})
        start = time.perf_counter()
        try:
            client.execute()
            error = None
        except CellExecutionError as err:
            lines = [ln for ln in str(err).strip().splitlines() if ln.strip()]
            error = lines[-1] if lines else "cell execution failed"
        return time.perf_counter() - start, error
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def latest_records(folder: Path, *, default_run: bool = False) -> list[dict]:
    """The records of the latest run of each chapter in ``folder`` (one per claim id); with
    ``default_run`` only runs at seed 0 and the default size count (``_build/claims`` also
    receives the records of chapters run by hand under another ``KRR_SEED`` or ``KRR_FULL``)."""
    out = []
    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        if default_run:
            rows = [r for r in rows if int(r.get("seed", 0)) == 0 and not r.get("full", False)]
        if rows:
            latest = rows[-1]["run"]
            out.extend({r["claim"]: r for r in rows if r["run"] == latest}.values())
    return out


def _numbers(v):
    if isinstance(v, list):
        return [x for u in v for x in _numbers(u)]
    if isinstance(v, bool) or v is None:
        return []
    return [float(v)] if isinstance(v, int | float) and math.isfinite(v) else []


def summarize(by_seed: dict[int, list[dict]], failed_chapters: dict[int, list[str]]) -> tuple[
        list[dict], bool]:
    """Per claim: seeds passed, seeds run, value range. A claim missing under a seed whose
    chapter failed counts as not passed."""
    claims: dict[str, dict] = {}
    for s, recs in by_seed.items():
        for r in recs:
            c = claims.setdefault(r["claim"], {"claim": r["claim"], "chapter": r["chapter"],
                                               "passed": [], "failed": [], "values": []})
            (c["passed"] if r["passed"] else c["failed"]).append(s)
            c["values"].extend(_numbers(r.get("value")))
    for s, chapters in failed_chapters.items():
        for c in claims.values():
            if c["chapter"] in chapters and s not in c["passed"] and s not in c["failed"]:
                c["failed"].append(s)
    rows = []
    for c in claims.values():
        vals = c.pop("values")
        c["n"] = len(c["passed"]) + len(c["failed"])
        c["range"] = [min(vals), max(vals)] if vals else None
        rows.append(c)
    ok = all(not c["failed"] for c in rows) and not any(failed_chapters.values())
    return rows, ok


def print_table(rows: list[dict], seeds: list[int]) -> None:
    print(f"\n{'claim':48s} {'seeds passed':>13s}  {'measured value: min .. max':28s} failed")
    for c in sorted(rows, key=lambda c: c["claim"]):
        rng = (f"{c['range'][0]:.4g} .. {c['range'][1]:.4g}" if c["range"] else "")
        failed = ",".join(map(str, sorted(c["failed"])))
        print(f"{c['claim']:48s} {len(c['passed']):>6d}/{c['n']:<6d}  {rng:28s} {failed}")
    print(f"(seeds {', '.join(map(str, seeds))})")


def chapters_matching(k: str) -> list[Path]:
    chapters = [p for p in toc_chapters(ROOT) if k in p.stem]
    if not chapters:
        raise SystemExit(f"no chapter matches -k {k!r}")
    return chapters


def run_seeds(args) -> int:
    os.environ["IPYTHONDIR"] = kernel_env(BUILD)["IPYTHONDIR"]
    chapters = chapters_matching(args.k)
    names = {p.stem for p in chapters}
    by_seed: dict[int, list[dict]] = {}
    failed: dict[int, list[str]] = {}
    times: dict[str, dict[str, float]] = {}
    for s in args.seeds:
        folder = BUILD / "seeds" / f"seed{s}"
        for path in chapters:
            (folder / f"{path.stem}.jsonl").unlink(missing_ok=True)
            env = {"KRR_SEED": str(s), "KRR_FULL": "0", "KRR_CLAIMS_DIR": str(folder)}
            seconds, error = execute(path, env, timeout=args.timeout)
            times.setdefault(path.stem, {})[str(s)] = round(seconds, 1)
            status = "ok" if error is None else f"FAILED: {error}"
            print(f"seed {s} {path.stem:26s} {seconds:6.1f} s  {status}", flush=True)
            if error is not None:
                failed.setdefault(s, []).append(path.stem)
        by_seed[s] = [r for r in latest_records(folder) if r["chapter"] in names]
    seeds = list(args.seeds)
    if 0 not in by_seed:
        zero = [r for r in latest_records(BUILD / "claims", default_run=True)
                if r["chapter"] in names]
        if zero:
            by_seed[0] = zero
            seeds = [0, *seeds]
            print("seed 0: records of the last default build (_build/claims)")
        else:
            print("seed 0: no records in _build/claims (run make book or make test first)")
    rows, ok = summarize(by_seed, failed)
    print_table(rows, seeds)
    (BUILD / "seeds").mkdir(parents=True, exist_ok=True)
    (BUILD / "seeds" / "summary.json").write_text(json.dumps(rows, indent=1))
    if args.record:  # -k replaces the records of its chapters only
        out = RESULTS / "seeds"
        (out / "claims").mkdir(parents=True, exist_ok=True)
        for name in sorted(names):
            lines = [json.dumps(r) for s in args.seeds for r in by_seed.get(s, [])
                     if r["chapter"] == name]
            (out / "claims" / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
        record_runs(out / "run.json", chapters, lambda name: {
            "seeds": list(args.seeds), "seconds": times.get(name, {}),
            "failed_seeds": [s for s in args.seeds if name in failed.get(s, [])]})
        print(f"recorded in {out.relative_to(ROOT)}")
    print("all claims passed under every seed" if ok else "SOME CLAIMS OR CHAPTERS FAILED")
    return 0 if ok else 1


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def record_runs(run_file: Path, chapters: list[Path], entry, replace_all: bool = False,
                **extra) -> dict:
    """Write ``run_file`` (``results/full/run.json`` or ``results/seeds/run.json``): one entry per
    chapter, ``{commit, dirty, date, **entry(name)}``. The entries of ``chapters`` replace their
    old ones and the other chapters' entries are kept (``-k NAME`` re-records one chapter),
    unless ``replace_all`` (a whole-book run). ``extra`` keys go at the top level. Returns what
    it wrote."""
    old = json.loads(run_file.read_text()) if run_file.is_file() and not replace_all else {}
    runs = old.get("chapters", {})
    state = git_state(chapters)
    for path in chapters:
        runs[path.stem] = {**state, "date": _now(), **entry(path.stem)}
    meta = {"chapters": dict(sorted(runs.items())), **extra}
    run_file.write_text(json.dumps(meta, indent=1) + "\n")
    return meta


EXECUTED = re.compile(r"(?P<doc>[^\s:]+\.md)[^\n]*?Executed notebook in (?P<s>[0-9.]+) seconds")


def run_full(args) -> int:
    chapters = chapters_matching(args.k)
    out = BUILD / "full"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    config["execute"].update({"execute_notebooks": "force", "timeout": -1})
    local = config["sphinx"].get("local_extensions") or {}  # paths are read from the config's
    config["sphinx"]["local_extensions"] = {k: str(ROOT / v) for k, v in local.items()}  # folder
    config["bibtex_bibfiles"] = [str(ROOT / b) for b in config.get("bibtex_bibfiles", [])]
    config_path = out / "_config.yml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    toc_path = ROOT / "_toc.yml"
    if args.k:  # a book of the matching chapters only (for trying one chapter at paper size)
        toc = {"format": "jb-book", "root": "intro",
               "chapters": [*({"file": str(p.relative_to(ROOT).with_suffix(""))} for p in chapters),
                            {"file": "claims"}, {"file": "api"}, {"file": "references"}]}
        toc_path = out / "_toc.yml"
        toc_path.write_text(yaml.safe_dump(toc, sort_keys=False))
    env = dict(kernel_env(BUILD), KRR_FULL="1", KRR_CLAIMS_DIR=str(out / "claims"))
    env.pop("KRR_SEED", None)
    cmd = [str(Path(sys.executable).parent / "jupyter-book"), "build", str(ROOT),
           "--config", str(config_path), "--toc", str(toc_path), "--path-output", str(out),
           "--all", "--keep-going", "-n"]
    if not args.k:
        cmd.append("-W")
    print("+ KRR_FULL=1", " ".join(cmd), flush=True)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    times: dict[str, float] = {}
    for line in proc.stdout:
        sys.stdout.write(line)
        m = EXECUTED.search(line)
        if m:
            times[Path(m["doc"]).stem] = float(m["s"])
    code = proc.wait()
    total = time.perf_counter() - start
    html = out / "_build" / "html"
    if html.is_dir():
        html.rename(out / "html")
    print(f"\n{'chapter':28s} {'seconds at KRR_FULL=1':>22s}")
    for path in chapters:
        t = times.get(path.stem)
        print(f"{path.stem:28s} {t if t is not None else float('nan'):22.1f}")
    print(f"{'whole build':28s} {total:22.1f}")
    records = latest_records(out / "claims")
    bad = [r["claim"] for r in records if not r["passed"]]
    if code == 0 and not bad and args.record:
        dest = RESULTS / "full"
        if not args.k:  # a whole-book run replaces every record; -k replaces its chapters only
            shutil.rmtree(dest, ignore_errors=True)
        (dest / "claims").mkdir(parents=True, exist_ok=True)
        for path in chapters:
            (dest / "claims" / f"{path.stem}.jsonl").unlink(missing_ok=True)
        for path in sorted((out / "claims").glob("*.jsonl")):
            recs = [r for r in latest_records(out / "claims") if r["chapter"] == path.stem]
            (dest / "claims" / path.name).write_text("".join(json.dumps(r) + "\n" for r in recs))
        record_runs(dest / "run.json", chapters,
                    lambda name: {"seconds": times.get(name), "cores": os.cpu_count()},
                    replace_all=not args.k,
                    whole_build_seconds=None if args.k else round(total, 1))
        print(f"recorded in {dest.relative_to(ROOT)}")
    if code != 0 or bad:
        print(f"FAILED (build exit {code}; failed claims: {', '.join(bad) or 'none'})")
        return 1
    print(f"the paper-size book is in {out / 'html'}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    p_seeds = sub.add_parser("seeds", help="each chapter under other seeds")
    p_seeds.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4])
    p_seeds.add_argument("--timeout", type=int, default=180, help="per-cell limit in seconds")
    p_full = sub.add_parser("full", help="the whole book at the papers' size")
    for p in (p_seeds, p_full):
        p.add_argument("-k", default="", help="only chapters whose file name contains this")
        p.add_argument("--record", action="store_true",
                       help="copy the records into results/ (to be committed)")
    args = parser.parse_args(argv)
    if args.what == "seeds" and any(s < 0 for s in args.seeds):
        parser.error("--seeds must be whole numbers >= 0")
    return run_seeds(args) if args.what == "seeds" else run_full(args)


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
