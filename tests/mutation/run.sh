#!/usr/bin/env bash
# Mutation check of graph.py, topo.py and the rules (not part of CI: tens of minutes on 2 cores).
#
#   bash tests/mutation/run.sh            # mutmut on graph.py + topo.py, then the rule-body pass
#   MUTMUT_LIMIT_S=1800 bash tests/mutation/run.sh
#
# mutmut (pip install mutmut; 3.x) mutates undecorated functions only, so the @rule bodies get
# tests/mutation/rules_pass.py. mutmut works on a copy of the tracked files (it writes mutants/
# and needs its own [tool.mutmut] section), so the checkout is left untouched. Scores and
# survivors land in $OUT (default: ./mutation-out); docs/mutation.md records the last run.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=${OUT:-$root/mutation-out}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git ls-files -z | (cd "$root" && xargs -0 cp --parents -t "$work")
cat >> "$work/pyproject.toml" <<'TOML'

[tool.mutmut]
source_paths = ["topodoctor/topology/graph.py", "topodoctor/topology/topo_matrix.py"]
also_copy = ["fixtures", "topodoctor", "docs"]
pytest_add_cli_args = ["-q", "-x", "-p", "no:cacheprovider"]
# The tests that read the graph and the matrix; the rest (CLI, bandwidth runner, file I/O,
# the 800-case probe sweep) never reach these modules' logic and only cost time per mutant.
pytest_add_cli_args_test_selection = ["tests/topology/test_graph.py", "tests/probe/test_replay.py", "tests/rules/test_rules.py",
  "tests/rules/test_rule_cases.py", "tests/rules/test_fault_classes.py"]
TOML
(
  cd "$work"
  unset PYTHONPATH  # mutmut imports the mutated copy, never the checkout
  timeout "${MUTMUT_LIMIT_S:-3600}" mutmut run --max-children "$(nproc)" > "$out/mutmut.log" 2>&1 || true
  mutmut results --all true > "$out/mutmut-results.txt" 2>/dev/null || true
  for m in $(grep -E ': survived$' "$out/mutmut-results.txt" | cut -d: -f1); do
    mutmut show "$m" 2>/dev/null || true
  done > "$out/mutmut-survivors.diff"
)
python3 - "$out" <<'PY'
import collections, pathlib, sys
out = pathlib.Path(sys.argv[1])
states = collections.Counter(l.rsplit(": ", 1)[-1].strip() for l in (out / "mutmut-results.txt").read_text().splitlines() if ": " in l)
done = states["killed"] + states["survived"] + states["timeout"]
print(f"mutmut graph.py + topo.py: {dict(states)}; score {100 * (states['killed'] + states['timeout']) / max(1, done):.1f}% of {done} checked")
PY
PYTHONPATH=$root python3 tests/mutation/rules_pass.py --json "$out/rules-pass.json" | tee "$out/rules-pass.txt"
