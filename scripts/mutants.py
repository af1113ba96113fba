"""`make mutants`: a mutation run (cosmic-ray) over the modules that guard users, against their unit tests.

    python scripts/mutants.py [--module store/check.py ...] [--timeout 120] [--sample N]

Each module of the installed package (the unit tests import it from the venv, not from factory/) is
mutated in place one mutation at a time by cosmic-ray, and the unit tests that cover it run against
each mutant: a failing run kills the mutant, a passing one lets it survive. The file is checked
against factory/ before and after, so an interrupted run is seen (`make install` puts it back).
Prints each module's kill rate and its survivors (file:line, operator). Not part of CI: it takes
hours of CPU on the whole list (docs/testing.md gives the last figures). ``--sample N`` runs only
every Nth mutant of a module (a subset, said so in the output).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import kernel_factory

ROOT = Path(__file__).resolve().parents[1]
INSTALLED = Path(kernel_factory.__file__).parent
BIN = Path(sys.executable).parent
MODULES = {  # module -> the unit tests that cover it
    "store/check.py": ["tests/unit/test_record_check.py"],
    "index/pages.py": ["tests/unit/test_index_pages.py", "tests/unit/test_index_write.py",
                       "tests/unit/test_index_incremental.py"],
    "verify/digest.py": ["tests/unit/test_digest.py", "tests/unit/test_wheel_convert.py"],
    "store/adopt.py": ["tests/unit/test_adopt_read.py"],
}


def same_as_source(module: str) -> bool:
    def digest(p: Path) -> str:
        return hashlib.sha256(p.read_bytes()).hexdigest()

    return digest(INSTALLED / module) == digest(ROOT / "factory" / module)


def run_module(module: str, tests: list[str], work: Path, timeout: float, sample: int) -> tuple[int, int, list[str]]:
    """(killed, total, survivors) of one module."""
    config, session = work / f"{module.replace('/', '_')}.toml", work / f"{module.replace('/', '_')}.sqlite"
    command = f"{sys.executable} -m pytest -x -q -p no:cacheprovider -p no:xdist {' '.join(tests)}"
    config.write_text(
        "[cosmic-ray]\n"
        f'module-path = "{INSTALLED / module}"\n'
        f"timeout = {timeout}\n"
        "excluded-modules = []\n"
        f"test-command = {json.dumps(command)}\n\n"
        '[cosmic-ray.distributor]\nname = "local"\n'
    )
    subprocess.run([str(BIN / "cosmic-ray"), "init", str(config), str(session)], check=True, cwd=ROOT)
    if sample > 1:  # keep every Nth mutant: mark the others done-and-skipped so exec leaves them
        db = sqlite3.connect(session)
        ids = [r[0] for r in db.execute("SELECT job_id FROM mutation_specs ORDER BY job_id")]
        skip = [i for n, i in enumerate(ids) if n % sample]
        db.executemany("INSERT INTO work_results (job_id, worker_outcome, output, test_outcome, diff) "
                       "VALUES (?, 'SKIPPED', '', NULL, '')", [(i,) for i in skip])
        db.commit()
        db.close()
    subprocess.run([str(BIN / "cosmic-ray"), "exec", str(config), str(session)], check=True, cwd=ROOT)
    db = sqlite3.connect(session)
    rows = db.execute(
        "SELECT s.start_pos_row, s.operator_name, r.test_outcome FROM mutation_specs s JOIN work_results r "
        "ON s.job_id = r.job_id WHERE r.worker_outcome = 'NORMAL' ORDER BY s.start_pos_row"
    ).fetchall()
    db.close()
    killed = sum(1 for _line, _op, outcome in rows if outcome == "KILLED")
    survivors = [f"factory/{module}:{line} {op}" for line, op, outcome in rows if outcome == "SURVIVED"]
    return killed, len(rows), survivors


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--module", action="append", choices=sorted(MODULES), help="which modules (default: all)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds a mutant's test run may take")
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
            for module in modules:
                killed, count, survivors = run_module(module, MODULES[module], Path(tmp), args.timeout, args.sample)
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
