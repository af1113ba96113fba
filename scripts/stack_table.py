#!/usr/bin/env python3
"""Print the consumer matrix's table, "stack -> cases that work", from the rows that
tests/integration/test_stack_matrix.py wrote into tests/.cache/stack-matrix/ (docs/testing.md).

    python scripts/stack_table.py            # the table, then every failed case with its first error line
    python scripts/stack_table.py --brief    # the table only
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

RESULTS = Path(__file__).resolve().parent.parent / "tests" / ".cache" / "stack-matrix"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brief", action="store_true", help="the table only, not the failures")
    parser.add_argument("--results", type=Path, default=RESULTS, help=f"the rows' folder (default: {RESULTS})")
    ns = parser.parse_args()
    rows = [json.loads(p.read_text()) for p in sorted(ns.results.glob("*.json"))]
    if not rows:
        print(f"no rows in {ns.results}: run pytest tests/integration/test_stack_matrix.py first")
        return 1
    by_stack: dict[str, list[dict[str, object]]] = defaultdict(list)
    for row in rows:
        by_stack[str(row["stack"])].append(row)
    print("| kernels + transformers | consumer cases that work | by provider |")
    print("|---|---|---|")
    failures: list[str] = []
    for stack in sorted(by_stack):
        ok = total = 0
        parts = []
        for row in sorted(by_stack[stack], key=lambda r: str(r["provider"])):
            cases: dict[str, str] = row["cases"]  # type: ignore[assignment]
            good = sum(v == "ok" for v in cases.values())
            ok, total = ok + good, total + len(cases)
            parts.append(f"{row['provider']} {good}/{len(cases)}")
            failures += [f"{stack} | {row['provider']} | {case}: {v}" for case, v in cases.items() if v != "ok"]
        print(f"| {stack} | {ok} of {total} | {'; '.join(parts)} |")
    if failures and not ns.brief:
        print()
        print("\n".join(failures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
