"""SQL views of the store for dashboards that query SQL without code (Grafana, Superset,
Metabase): docs/store.md#views-for-grafana-superset-and-metabase.

    ldp_estimates        one row per (metric, version, window, value) of each window's latest
                         pane: time, label, estimate, its 95% band, n, pane, whether the value is
                         above the window's smallest resolvable frequency
    ldp_value_ranks      per (metric, version, window length, value): its mean estimate over
                         the windows and its rank (1 = largest) — the top-k of a series
    ldp_top_series       ldp_estimates with each value's rank: `WHERE rank <= 5` is a top-5 panel
    ldp_window_accounting  per window: n, late reports, pane, dead letters counted in it
    ldp_summary_bands    numeric metrics: mean, variance and quantiles per window with the
                         record's 95% band (output/bands.py; null where it has none)

`time` is the window's start: TIMESTAMPTZ on PostgreSQL, ISO-8601 text on SQLite. The views are
made with the tables (and by `ldp dashboard` in a store made before them); the same text serves
both databases but for `GREATEST`/`MAX`.
"""
from __future__ import annotations

_VIEWS = {
    "ldp_estimates": """
SELECT v.metric, v.version, v.window_start AS time, v.window_start, v.window_end,
  v.window_start_ms, v.window_end_ms, v.window_end_ms - v.window_start_ms AS window_ms,
  v.value_index, v.label, v.estimate, v.std_error, v.lower95, v.upper95,
  {greatest}(v.lower95, 0) AS lower95_clipped, w.n, w.late_reports, w.pane_timing,
  w.protocol, w.epsilon, w.smallest_resolvable,
  CASE WHEN w.smallest_resolvable IS NULL THEN NULL
       WHEN v.estimate >= w.smallest_resolvable THEN 1 ELSE 0 END AS resolved
FROM ldp_window_values v JOIN ldp_windows w
  ON w.metric = v.metric AND w.version = v.version AND w.window_start_ms = v.window_start_ms
 AND w.window_end_ms = v.window_end_ms""",
    "ldp_value_ranks": """
SELECT metric, version, window_end_ms - window_start_ms AS window_ms, value_index,
  MIN(label) AS label, AVG(estimate) AS mean_estimate, COUNT(*) AS windows,
  RANK() OVER (PARTITION BY metric, version, window_end_ms - window_start_ms
               ORDER BY AVG(estimate) DESC, value_index) AS rank
FROM ldp_window_values
GROUP BY metric, version, window_end_ms - window_start_ms, value_index""",
    "ldp_top_series": """
SELECT e.*, r.rank, r.mean_estimate
FROM ldp_estimates e JOIN ldp_value_ranks r
  ON r.metric = e.metric AND r.version = e.version AND r.window_ms = e.window_ms
 AND r.value_index = e.value_index""",
    "ldp_window_accounting": """
SELECT w.metric, w.version, w.window_start AS time, w.window_start, w.window_end,
  w.window_start_ms, w.window_end_ms, w.n, w.n_on_time, w.late_reports, w.pane_timing,
  w.pane_index, w.smallest_resolvable,
  (SELECT COALESCE(SUM(r.records), 0) FROM ldp_rejects r
   WHERE r.metric = w.metric AND r.slice_start_ms >= w.window_start_ms
     AND r.slice_start_ms < w.window_end_ms AND r.slice_end_ms <= w.window_end_ms) AS rejected
FROM ldp_windows w""",
    "ldp_summary_bands": """
SELECT metric, version, window_start AS time, window_start, window_end, window_start_ms,
  window_end_ms, statistic, value, std_error, lower95, upper95
FROM ldp_window_summaries""",
}

#: The views, in the order they are made (a view after those it reads).
VIEWS = tuple(_VIEWS)


def view_statements(dialect: str) -> list[str]:
    """The statements that make (or remake) every view for `dialect`."""
    greatest = "GREATEST" if dialect == "postgresql" else "MAX"
    statements = []
    for name in reversed(VIEWS):  # drop dependents first: a view's columns may have changed
        statements.append(f"DROP VIEW IF EXISTS {name}")
    for name in VIEWS:
        statements.append(f"CREATE VIEW {name} AS {_VIEWS[name].format(greatest=greatest)}")
    return statements


def create_views(cursor, dialect: str) -> None:
    """Make the views (inside the caller's transaction)."""
    for statement in view_statements(dialect):
        cursor.execute(statement)


def missing_views(store) -> list[str]:
    """The views the store lacks."""
    if store.dialect == "sqlite":
        rows = store._query("SELECT name FROM sqlite_master WHERE type = 'view'")
    else:
        rows = store._query("SELECT viewname FROM pg_views WHERE schemaname = current_schema()")
    found = {row[0] for row in rows}
    return [name for name in VIEWS if name not in found]
