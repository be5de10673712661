"""summary.md of scripts/relay-tester.sh: counts per pass and one row per
test, from relay-tester's --script output (one JSON object a line)."""

import json
import sys

out = sys.argv[1]
passes = sys.argv[2:]


def load(name):
    rows = []
    with open(f"{out}/{name}.jsonl") as f:
        for line in f:
            if line.startswith("{"):
                rows.append(json.loads(line))
    return rows


def verdict(row):
    # The suite's own words: PASS/FAIL for required tests, YES/NO for
    # optional ones (a relay may rightly answer NO), UNTESTED for either.
    if row["pass"] is None:
        word = "UNTESTED"
    elif row["required"]:
        word = "PASS" if row["pass"] else "FAIL"
    else:
        word = "YES" if row["pass"] else "NO"
    if row["pass"] is not True and row["info"]:
        word += f" ({row['info']})"
    return word


runs = {name: load(name) for name in passes}
failures = 0
print("| pass | required: pass | fail | untested | optional: yes | no | untested |")
print("|---|---:|---:|---:|---:|---:|---:|")
for name, rows in runs.items():
    req = [r for r in rows if r["required"]]
    opt = [r for r in rows if not r["required"]]
    fail = sum(r["pass"] is False for r in req)
    failures += fail
    print(
        f"| {name} | {sum(r['pass'] is True for r in req)} | {fail} "
        f"| {sum(r['pass'] is None for r in req)} "
        f"| {sum(r['pass'] is True for r in opt)} "
        f"| {sum(r['pass'] is False for r in opt)} "
        f"| {sum(r['pass'] is None for r in opt)} |"
    )
print()
print(f"required failures: {failures}")
print()
print("| test | required | " + " | ".join(passes) + " |")
print("|---|---|" + "---|" * len(passes))
order = [r["test"] for r in runs[passes[0]]]
for name in passes[1:]:
    order += [r["test"] for r in runs[name] if r["test"] not in order]
by_test = {name: {r["test"]: r for r in rows} for name, rows in runs.items()}
for test in order:
    cells = []
    required = ""
    for name in passes:
        row = by_test[name].get(test)
        if row is None:
            cells.append("(not run)")
            continue
        required = "yes" if row["required"] else "no"
        cells.append(verdict(row).replace("|", "\\|"))
    print(f"| {test} | {required} | " + " | ".join(cells) + " |")
