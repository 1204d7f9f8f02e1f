#!/usr/bin/env bash
# The mutation pass over every area, one after the other (not part of CI: tens of minutes per area
# on two cores). Scores and survivors land in $OUT (default ./mutation-out); docs/mutation.md
# records the last run.
#
#   bash tests/mutation/run.sh                 # every area
#   bash tests/mutation/run.sh graph fileio    # some
#   EVERY=4 LIMIT_S=1800 bash tests/mutation/run.sh rules   # every 4th mutant, at most half an hour
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-$PWD/mutation-out}
mkdir -p "$out"
areas=("$@")
[ ${#areas[@]} -gt 0 ] || areas=(rules graph job fleet nccl fileio)
for area in "${areas[@]}"; do
  timeout -k 10 "$(( ${LIMIT_S:-3600} + 600 ))" python3 tests/mutation/mutate.py "$area" \
    --every "${EVERY:-1}" --limit-s "${LIMIT_S:-3600}" --json "$out/$area.json" \
    > "$out/$area.txt" 2> "$out/$area.log" || true
  grep -E "^$area: " "$out/$area.txt" || echo "$area: no result (see $out/$area.log)"
done
