"""`make mutants`: a mutation run (cosmic-ray) over the modules that guard users, against their unit tests.

    python scripts/mutants.py [--module store/check.py ...] [--timeout 120] [--sample N]

Each module of the installed package (the unit tests import it from the venv, not from factory/) is
mutated in place one mutation at a time by cosmic-ray, and the unit tests that cover it run against
each mutant: a failing run kills the mutant, a passing one lets it survive. The file is checked
against factory/ before and after, so an interrupted run is seen (`make install` puts it back).
Prints each module's kill rate and its survivors (file:line, operator). Not part of CI: it takes
hours of CPU on the whole list (docs/testing.md gives the last figures). ``--sample N`` runs only
every Nth mutant of a module (a subset, said so in the output).

Mutants inside type annotations are left out before the run (counted and said so): these modules
use ``from __future__ import annotations``, so an annotation is never evaluated and a mutant there
is equivalent. cosmic-ray's own filters work by line or by pragma, and a signature's annotations
share its line with code, so the spans come from ``ast``. The unit tests run once unmutated first:
a failing baseline would "kill" every mutant, so it stops the run; its time sets the per-mutant
timeout (4x, at least 30 s) unless ``--timeout`` is given. pytest stops at the first failure
(``-x``), so a killed mutant costs less than a survivor.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import kernel_factory

ROOT = Path(__file__).resolve().parents[1]
INSTALLED = Path(kernel_factory.__file__).parent
BIN = Path(sys.executable).parent
MODULES = {  # module -> the unit tests that cover it
    "store/check.py": ["tests/unit/test_store_check.py"],
    "store/catalog.py": ["tests/unit/test_store_catalog.py", "tests/unit/test_store_local.py",
                         "tests/unit/test_index_write.py", "tests/unit/test_index_state_catalog.py"],
    "index/pages.py": ["tests/unit/test_index_pages.py", "tests/unit/test_index_write.py",
                       "tests/unit/test_index_incremental.py", "tests/unit/test_index_pages_exact.py",
                       "tests/unit/test_index_pages_project.py"],
    "verify/digest.py": ["tests/unit/test_digest.py", "tests/unit/test_wheel_convert.py"],
    "store/adopt.py": ["tests/unit/test_adopt_read.py", "tests/unit/test_index_write.py",
                       "tests/unit/test_index_rerun.py", "tests/unit/test_report.py",
                       "tests/unit/test_adopt_write.py", "tests/unit/test_adopt_repair.py"],
    "local/download/wheelcheck.py": ["tests/unit/test_download_limits.py", "tests/unit/test_download_wheelcheck.py"],
    "fetch.py": ["tests/unit/test_fetch.py", "tests/unit/test_fetch_limits.py", "tests/unit/test_download_fetch.py"],
    "safe_text.py": ["tests/unit/test_safe_text.py"],
    "local/download/command.py": ["tests/unit/test_download_fetch.py", "tests/unit/test_download_run.py",
                                  "tests/unit/test_download_cache.py", "tests/unit/test_download_trust.py",
                                  "tests/unit/test_download_select.py", "tests/unit/test_download_limits.py"],
    "local/which.py": ["tests/unit/test_download_select.py", "tests/unit/test_which_variant.py",
                       "tests/unit/test_which_run.py"],
    "local/cache/writer.py": ["tests/unit/test_cache_writer.py", "tests/unit/test_cache_writer_trust.py",
                              "tests/unit/test_cache_writer_replace.py", "tests/unit/test_download_trust.py",
                              "tests/unit/test_download_select.py", "tests/unit/test_download_run.py"],
    "local/cache/stage.py": ["tests/unit/test_cache_stage.py", "tests/unit/test_cache_writer_trust.py",
                             "tests/unit/test_cache_writer.py", "tests/unit/test_download_select.py"],
    "nofollow.py": ["tests/unit/test_nofollow.py", "tests/unit/test_cache_writer_trust.py",
                    "tests/unit/test_cache_writer.py", "tests/unit/test_index_write.py"],
    "local/local_kernels/installed.py": ["tests/unit/test_local_kernels_installed.py",
                                         "tests/unit/test_local_kernels_command.py",
                                         "tests/unit/test_local_kernels_loaders.py"],
    "local/local_kernels/command.py": ["tests/unit/test_local_kernels_command.py",
                                       "tests/unit/test_local_kernels_loaders_mapping.py",
                                       "tests/unit/test_local_kernels_loaders.py"],
    "local/local_kernels/loaders.py": ["tests/unit/test_local_kernels_loaders.py",
                                       "tests/unit/test_local_kernels_loaders_mapping.py"],
    "local/cache/__init__.py": ["tests/unit/test_cache_writer.py", "tests/unit/test_download_run.py"],
    "local/local_kernels/checks.py": ["tests/unit/test_local_kernels_checks.py",
                                      "tests/unit/test_local_kernels_command.py",
                                      "tests/unit/test_local_kernels_loaders_mapping.py",
                                      "tests/unit/test_cache_writer.py"],
    "local/probe/environment.py": ["tests/unit/test_local_kernels_checks.py", "tests/unit/test_cache_writer.py",
                                   "tests/unit/test_which_variant.py", "tests/unit/test_which_run.py",
                                   "tests/unit/test_download_select.py"],
    "pipeline/flow.py": ["tests/unit/test_pipeline_flow.py"],
}


def same_as_source(module: str) -> bool:
    def digest(p: Path) -> str:
        return hashlib.sha256(p.read_bytes()).hexdigest()

    return digest(INSTALLED / module) == digest(ROOT / "factory" / module)


def annotation_spans(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(start, end) of every annotation in ``source``: (line, column in characters), as cosmic-ray counts."""
    lines = source.splitlines()

    def column(line: int, byte_offset: int) -> int:  # ast counts UTF-8 bytes, cosmic-ray (parso) characters
        return len(lines[line - 1].encode()[:byte_offset].decode())

    spans = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.returns
        elif isinstance(node, (ast.arg, ast.AnnAssign)):
            a = node.annotation
        else:
            continue
        if a is not None and a.end_lineno is not None and a.end_col_offset is not None:
            spans.append(((a.lineno, column(a.lineno, a.col_offset)),
                          (a.end_lineno, column(a.end_lineno, a.end_col_offset))))
    return spans


def skip(db: sqlite3.Connection, ids: list[str]) -> None:
    """Mark jobs done-and-skipped so `cosmic-ray exec` leaves them."""
    db.executemany("INSERT INTO work_results (job_id, worker_outcome, output, test_outcome, diff) "
                   "VALUES (?, 'SKIPPED', '', NULL, '')", [(i,) for i in ids])
    db.commit()


def baseline(command: str, times: Path) -> float:
    """Seconds the unmutated tests take; exits if they fail (every mutant would count as killed).

    Each test's time goes to ``times``, by which the mutant runs order the tests (scripts/mutants_order.py).
    """
    start = time.monotonic()
    done = subprocess.run(f"MUTANTS_RECORD=1 {command}", shell=True, cwd=ROOT, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"error: the unit tests fail without any mutant (`{command}`):\n{done.stdout[-2000:]}")
    return time.monotonic() - start


def run_module(module: str, tests: list[str], work: Path, timeout: float | None,
               sample: int) -> tuple[int, int, list[str]]:
    """(killed, total, survivors) of one module."""
    config, session = work / f"{module.replace('/', '_')}.toml", work / f"{module.replace('/', '_')}.sqlite"
    times = work / f"{module.replace('/', '_')}.times.json"
    # cosmic-ray splits the command itself (no shell): `env` sets the variables
    command = (f"env PYTHONPATH={ROOT / 'scripts'} MUTANTS_TIMES={times} {sys.executable} -m pytest -x -q "
               f"-p no:cacheprovider -p no:xdist -p mutants_order {' '.join(tests)}")
    took = baseline(command, times)
    if timeout is None:
        timeout = max(30.0, 4 * took)
    print(f"{module}: unmutated tests pass in {took:.0f} s; per-mutant timeout {timeout:.0f} s", flush=True)
    config.write_text(
        "[cosmic-ray]\n"
        f'module-path = "{INSTALLED / module}"\n'
        f"timeout = {timeout}\n"
        "excluded-modules = []\n"
        f"test-command = {json.dumps(command)}\n\n"
        '[cosmic-ray.distributor]\nname = "local"\n'
    )
    session.unlink(missing_ok=True)
    subprocess.run([str(BIN / "cosmic-ray"), "init", str(config), str(session)], check=True, cwd=ROOT)
    spans = annotation_spans((INSTALLED / module).read_text())
    db = sqlite3.connect(session)
    specs = db.execute("SELECT job_id, start_pos_row, start_pos_col FROM mutation_specs ORDER BY job_id").fetchall()
    in_annotation = [i for i, row, col in specs if any(a <= (row, col) < b for a, b in spans)]
    skip(db, in_annotation)
    left_out = set(in_annotation)
    kept = [i for i, _row, _col in specs if i not in left_out]
    print(f"{module}: {len(specs)} mutants; {len(in_annotation)} left out as inside type annotations "
          f"(never evaluated under `from __future__ import annotations`: equivalent); {len(kept)} to run", flush=True)
    if sample > 1:  # keep every Nth of the rest
        skip(db, [i for n, i in enumerate(kept) if n % sample])
    db.close()
    subprocess.run([str(BIN / "cosmic-ray"), "exec", str(config), str(session)], check=True, cwd=ROOT)
    db = sqlite3.connect(session)
    rows = db.execute(
        "SELECT s.start_pos_row, s.start_pos_col, s.operator_name, r.test_outcome, r.output, r.diff "
        "FROM mutation_specs s JOIN work_results r ON s.job_id = r.job_id WHERE r.worker_outcome = 'NORMAL' "
        "ORDER BY s.start_pos_row, s.start_pos_col"
    ).fetchall()
    db.close()
    killed = sum(1 for *_, outcome, _out, _diff in rows if outcome == "KILLED")
    other = [f"{line}:{col} {op} {outcome}" for line, col, op, outcome, _o, _d in rows
             if outcome not in ("KILLED", "SURVIVED")]
    if other:  # the test command could not start: neither killed nor survived
        print(f"{module}: {len(other)} mutants not tested ({other[0]}...): counted as not killed")
    timeouts = sum(1 for *_, outcome, out, _diff in rows if outcome == "KILLED" and out == "timeout")
    if timeouts:
        print(f"{module}: {timeouts} of the killed mutants were killed by the timeout")
    def changed(diff: str | None) -> str:  # the diff's - and + lines
        return " / ".join(d.strip() for d in (diff or "").splitlines() if d[:1] in "+-" and d[:3] not in ("+++", "---"))

    survivors = [f"factory/{module}:{line}:{col} {op}: {changed(diff)}"
                 for line, col, op, outcome, _out, diff in rows if outcome == "SURVIVED"]
    return killed, len(rows), survivors


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--module", action="append", choices=sorted(MODULES), help="which modules (default: all)")
    ap.add_argument("--timeout", type=float, default=None,
                    help="seconds a mutant's test run may take (default: 4x the unmutated run, at least 30)")
    ap.add_argument("--work", type=Path, help="keep the cosmic-ray sessions here (default: a temporary folder)")
    ap.add_argument("--sample", type=int, default=1, help="run every Nth mutant only (default: all)")
    args = ap.parse_args()
    modules = args.module or sorted(MODULES)
    stale = [m for m in modules if not same_as_source(m)]
    if stale:
        print(f"error: the installed {', '.join(stale)} differs from factory/: run `make install` first",
              file=sys.stderr)
        return 2
    total_killed = total = 0
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = args.work or Path(tmp)
            work.mkdir(parents=True, exist_ok=True)
            for module in modules:
                killed, count, survivors = run_module(module, MODULES[module], work.resolve(), args.timeout,
                                                      args.sample)
                total_killed, total = total_killed + killed, total + count
                subset = f" (every {args.sample}th mutant)" if args.sample > 1 else ""
                print(f"{module}: {killed} of {count} mutants killed{subset}, "
                      f"{killed / max(count, 1):.0%}; survivors:")
                print("\n".join(f"  {s}" for s in survivors) or "  none")
    finally:
        broken = [m for m in modules if not same_as_source(m)]
        if broken:
            print(f"error: {', '.join(broken)} left mutated in the venv: run `make install`", file=sys.stderr)
    print(f"total: {total_killed} of {total} killed, {total_killed / max(total, 1):.0%}")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
