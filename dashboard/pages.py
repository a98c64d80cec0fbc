"""The dashboard's HTML: an index of metrics and one page per metric.

Every value from the data is escaped (`html.escape` in markup; JSON embedded in a
`<script type="application/json">` with `<`, `>` and `&` written as \\u escapes), and the page
loads nothing but its own static/ files: `dashboard.css`, `dashboard.js` and the vendored chart
library uPlot (`uPlot.min.css`, `uPlot.iife.min.js`).
"""
from __future__ import annotations

import html
import json
import math
from urllib.parse import quote

from ldp_telemetry.ldp.base.times import iso_from_ms
from ldp_telemetry.ldp.config.budget import budget_text, repeated_reports_note, window_cost
from ldp_telemetry.output.bands import Z95
from ldp_telemetry.output.text import CONSERVATIVE_NOTE
from ldp_telemetry.output.layout import metric_segment, window_key
from ldp_telemetry.output.names import printable
from ldp_telemetry.store.records import labels_per_window

#: Values listed in the top-k chart of a metric page.
DEFAULT_TOP_K = 5
#: The per-value arrays of a window view (`source._view`), cut together in an export.
VALUE_FIELDS = ("labels", "estimate", "std_error", "unbiased_estimate", "lower95", "upper95",
                "half95")
#: An exported window keeps every value when its domain has at most this many values, and
#: otherwise the values of its series' top k: an export grows with windows × top-k, not with
#: windows × domain.
EXPORT_ALL_VALUES = 128
#: Windows per data file of an export (a file system pays per file more than per byte).
EXPORT_CHUNK = 100
PAGE_PREFIX, PAGE_SUFFIX = "metric-", ".html"


def metric_page_name(metric: str) -> str:
    """The file name of a metric's page, `metric-<segment>.html`: the metric's name encoded by
    `output.layout.metric_segment`, so two metrics never share a page and the name is safe in a
    file system. Its `%` escapes are part of the name: link to it with `metric_page_link`."""
    return f"{PAGE_PREFIX}{metric_segment(metric)}{PAGE_SUFFIX}"


def metric_page_link(metric: str) -> str:
    """The relative URL of a metric's page: its file name URL-quoted (`%` -> `%25`)."""
    return quote(metric_page_name(metric), safe="")


def finite(value):
    """`value` with every NaN or infinite float replaced by None (JSON has no NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def embedded_json(value, checked: bool = False) -> str:
    """JSON safe inside a <script> element: no '<', '>' or '&' can end it or open a tag.
    NaN and infinities become null (`finite`) unless `checked` says there are none."""
    text = json.dumps(value if checked else finite(value), separators=(",", ":"),
                      allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _page(title: str, body: str) -> str:
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title>
<link rel="stylesheet" href="static/uPlot.min.css">
<link rel="stylesheet" href="static/dashboard.css">
<link rel="icon" href="data:,">
</head>
<body>
{body}
</body>
</html>
"""


def _time_text(ms: int) -> str:
    return iso_from_ms(ms).replace("T", " ").replace(":00Z", "").replace("Z", "")


def _number(value, digits: int = 4) -> str:
    return "—" if value is None else f"{value:.{digits}g}"


def _params(spec: dict | None) -> str:
    params = (spec or {}).get("params") or {}
    shown = ", ".join(f"{k}={'fitted' if v is None else v}" for k, v in sorted(params.items()))
    return f" ({shown})" if shown else ""


def index_page(summaries: list[dict], unattributed: dict[tuple[str, str], int],
               source: str, live: bool) -> str:
    """The index: one row per metric (its latest window, n and rejects), and dead letters that
    belong to no window."""
    rows = []
    for s in summaries:
        rows.append(
            f'<tr><td><a href="{html.escape(metric_page_link(s["metric"]))}">'
            f'{html.escape(printable(s["metric"]))}</a></td>'
            f'<td>{html.escape(str(s["protocol"]))}</td><td class="num">{s["epsilon"]:g}</td>'
            f'<td class="num">{s["windows"]:,}</td>'
            f'<td>{html.escape(_time_text(s["latest_start_ms"]))}</td>'
            f'<td class="num">{s["latest_n"]:,}</td>'
            f'<td class="num">{s["rejects"]:,}</td>'
            f'<td>{html.escape(s["latest_timing"].replace("_", " ").lower())}</td></tr>')
    table = ("<table class=\"grid\" id=\"metrics\"><thead><tr><th>metric</th><th>protocol</th>"
             "<th class=\"num\">ε</th><th class=\"num\">windows</th><th>latest window (UTC)</th>"
             "<th class=\"num\">n</th><th class=\"num\">rejected</th><th>latest pane</th>"
             "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
             if rows else "<p class=\"empty\">No windows yet.</p>")
    apart = ""
    if unattributed:
        items = "".join(
            f"<tr><td>{html.escape(printable(metric)) or '<i>unknown</i>'}</td>"
            f"<td>{html.escape(printable(reason))}</td><td class=\"num\">{count:,}</td></tr>"
            for (metric, reason), count in sorted(unattributed.items()))
        apart = ("<h2>Dead letters in no window</h2><p class=\"note\">Input that could not be "
                 "decoded, names no known metric, or has no valid event time.</p>"
                 "<table class=\"grid\"><thead><tr><th>metric</th><th>reason</th>"
                 f"<th>records</th></tr></thead><tbody>{items}</tbody></table>")
    mode = "live: reload for new metrics" if live else "static export"
    body = f"""<header class="top"><h1>LDP telemetry</h1>
<p class="source">windows from <code>{html.escape(source)}</code> · {mode}</p></header>
<main><section class="card"><h2>Metrics</h2>{table}</section>
{f'<section class="card">{apart}</section>' if apart else ""}</main>"""
    return _page("LDP telemetry — metrics", body)


def metric_page(metric: str, data: dict, latest: dict | None, source: str, live: bool,
                top_k: int = DEFAULT_TOP_K, poll_ms: int = 2000,
                window_files: dict | None = None) -> str:
    """One metric: a header (protocol, ε, domain, p*, q*, estimator, post-processing) from
    `latest` (the latest window's view, or None), the advice on each series' resolution, and
    `data` (`payload.pack`) that the script draws; a chosen window's values are fetched from
    /api/window, or on an exported page from `window_files` ({"prefix": URL, "files": [[first
    window's start ms, file name], ...]}, `export_chunks`)."""
    latest = latest or {"metric": metric}
    d = len(latest.get("labels") or latest.get("estimate") or ())
    strings = labels_per_window(latest.get("protocol"))  # heavy hitters found per window
    levels = len((latest.get("heavy_hitters") or {}).get("level_reports") or ())  # one a byte
    domain = (f"strings of at most {levels or '?'} bytes (open); heavy hitters found per window"
              if strings else f"{d:,} values")
    estimator = latest.get("estimator") or {}
    estimator_text = (html.escape(str(estimator.get("method", "—")))
                      + html.escape(_params(estimator)))
    postprocess = latest.get("postprocess") or {}
    postprocess_text = (html.escape(str(postprocess.get("method", "—")))
                        + html.escape(_params(postprocess)))
    status = "live" if live else "static export"
    numeric = latest.get("bucket_edges") is not None or "mean" in latest
    # a string metric's heavy hitters have no 95% band (output.bands.value_band_method): the
    # hint names none, their standard errors are in the chosen window's table
    top_hint = ("estimate, no 95% band (heavy hitters: chosen by the search for their "
                "estimates; standard errors in the window's table); click a window" if strings
                else f"estimate, 95% band (± {Z95:.2f} standard errors); click a window")
    over_title = (f"Mean over windows <span class=\"hint\">{top_hint}</span>" if numeric else
                  f"Top {top_k} {'strings' if strings else 'values'} over windows "
                  f"<span class=\"hint\">{top_hint}; click a "
                  "legend entry to hide or show a value, hover it to see its "
                  f"{'estimate' if strings else 'band'}</span>")
    advice = "".join(
        f'<p class="warning advice" data-series="{html.escape(s["name"])}">'
        f'{html.escape(s["name"])} windows: {html.escape(s["advice"])}</p>'
        for s in data["series"] if s.get("advice"))
    header = f"""<header class="top">
<p class="crumbs"><a href="index.html">← all metrics</a></p>
<h1>{html.escape(printable(metric))}</h1>
<dl class="facts">
<div><dt>protocol</dt><dd>{html.escape(str(latest.get("protocol", "—")))}</dd></div>
<div><dt>ε</dt><dd>{_number(latest.get("epsilon"))}</dd></div>
<div><dt>domain</dt><dd>{html.escape(domain)}</dd></div>
<div><dt>p*</dt><dd>{_number(latest.get("p_star"))}</dd></div>
<div><dt>q*</dt><dd>{_number(latest.get("q_star"))}</dd></div>
<div><dt>estimator</dt><dd>{estimator_text}</dd></div>
<div><dt>post-processing</dt><dd>{postprocess_text}</dd></div>
</dl>
{privacy_section(latest.get("privacy"), latest)}
<p class="source">windows from <code>{html.escape(source)}</code> ·
<span id="status">{status}</span> · ± is the half width of a 95% band centred on its
estimate ({Z95:.2f} standard errors); a band that is not is shown as [lower, upper]</p>
<div id="advice">{advice}</div>
</header>"""
    state = {"metric": metric, "metric_shown": printable(metric), "live": live,
             "top_k": top_k, "poll_ms": poll_ms, "numeric": numeric,
             "conservative_note": CONSERVATIVE_NOTE,
             "window_files": window_files, **data}
    order = "" if numeric else """<label class="control">order
<select id="order-select" aria-label="order"><option value="ranked">ranked by estimate</option>
<option value="label">label order</option></select></label>
<button type="button" id="show-all" class="control"></button>"""
    body = f"""{header}
<main>
<section class="card" id="series-card" hidden><label class="control">series (window length,
configuration version)
<select id="series-select" aria-label="series"></select></label>
<span class="hint">this metric has windows of several lengths; each is drawn on its own</span>
</section>
<section class="card">
<h2>{over_title}</h2>
<div id="range-bar" class="range-bar" hidden>
<button type="button" id="range-earlier" class="control">◀ earlier windows</button>
<span id="range-text"></span>
<button type="button" id="range-later" class="control">later windows ▶</button>
<button type="button" id="range-latest" class="control">latest</button></div>
<div id="topk" class="chart"></div><div id="topk-readout" class="readout"></div>
<div id="topk-legend" class="legend"></div><p id="topk-note" class="hint" hidden></p></section>
<section class="card"><h2>Window <select id="window-select" aria-label="window"></select>
<button type="button" id="window-prev" class="control" aria-label="previous window">◀</button>
<input type="range" id="window-slider" class="control" min="0" max="0" step="1" value="0"
aria-label="window by time">
<button type="button" id="window-next" class="control" aria-label="next window">▶</button>
{order}</h2>
<p class="hint">← → or the slider: the previous or next window; the chosen window is in the
address</p>
<dl class="facts small" id="window-facts"></dl>
<p id="window-warning" class="warning" hidden></p>
<p id="window-integrity" class="integrity-flag" hidden></p>
<div id="distribution" class="chart wide"></div>
<div id="quantiles" class="chart"></div>
<details open><summary>Values of this window</summary>
<input type="search" id="values-filter" class="control" placeholder="filter values by label"
aria-label="filter values by label">
<div id="values" class="scroll"></div></details>
</section>
<section class="card">
<h2>Reports per window
<span class="hint">n counted (late part shaded), rejected by reason</span></h2>
<div id="accounting" class="chart"></div><div id="accounting-table" class="scroll"></div></section>
</main>
<script id="ldp-data" type="application/json">{embedded_json(state, checked=True)}</script>
<script src="static/uPlot.iife.min.js"></script>
<script src="static/dashboard.js"></script>"""
    return _page(f"{printable(metric)} — LDP telemetry", body)


def window_file_name(first_start_ms: int) -> str:
    """The data file of an export's windows from the one starting at `first_start_ms`."""
    return f"{first_start_ms}.js"


def export_chunks(views: list[dict]) -> list[list[dict]]:
    """`views` (sorted by start) cut into runs of about `EXPORT_CHUNK` windows, never between
    two windows of one start (the page finds a window's file by its start)."""
    chunks: list[list[dict]] = []
    for view in views:
        start = window_key(view).start_ms
        if not chunks or (len(chunks[-1]) >= EXPORT_CHUNK
                          and window_key(chunks[-1][-1]).start_ms != start):
            chunks.append([])
        chunks[-1].append(view)
    return chunks


def export_window_file(views: list[dict]) -> str:
    """Window views as a script an exported page loads from a file (a page opened from disk
    may load scripts, not fetch JSON): ``ldpWindows([...]);``. A whole view of a domain of more
    than `EXPORT_ALL_VALUES` values (an output folder's) keeps its largest
    `EXPORT_ALL_VALUES`, with `values_total` saying how many there are."""
    cut = []
    for view in views:
        size = len(view.get("estimate") or ())
        if size > EXPORT_ALL_VALUES and "values_total" not in view:
            keep = sorted(sorted(range(size), key=lambda i: (-(view["estimate"][i] or 0.0), i))
                          [:EXPORT_ALL_VALUES])
            view = dict(view)
            for name in VALUE_FIELDS:
                if isinstance(view.get(name), list) and len(view[name]) == size:
                    view[name] = [view[name][i] for i in keep]
            view["values_total"] = size
            view["value_indices"] = keep
        cut.append(view)
    return f"ldpWindows({embedded_json(cut)});\n"


def privacy_section(privacy: dict | None, window: dict | None = None) -> str:
    """What the metric's configuration promises a device (ldp_telemetry.ldp.config.budget): per
    report, per window (of `window`, the latest), per day, over a lifetime, and the composition
    rule; empty for records without it."""
    text = budget_text(privacy)
    if text is None:
        return ""
    per_window, note = "", None
    if window is not None and "window_start" in window:
        _, start_ms, end_ms, _ = window_key(window)
        note = repeated_reports_note(privacy, end_ms - start_ms)
        per_window = (f"<div><dt>ε per window</dt><dd>"
                      f"{html.escape(window_cost(privacy, end_ms - start_ms))}</dd></div>\n")
    lifetime = ("unbounded (grows every day)" if privacy.get("lifetime") is None
                else f"ε = {privacy['lifetime']:.4g}")
    per_day = ("—" if privacy.get("per_day") is None
               else f"ε = {privacy['per_day']:.4g} at {privacy['reports_per_day']:g} "
                    "reports/day")
    return f"""<dl class="facts" id="privacy" aria-label="privacy budget">
<div><dt>ε per report</dt><dd>{_number(privacy.get("per_report"))}</dd></div>
{per_window}<div><dt>ε per day</dt><dd>{html.escape(per_day)}</dd></div>
<div><dt>lifetime ε</dt><dd>{html.escape(lifetime)}</dd></div>
</dl>
<p class="source" id="privacy-text">privacy: {html.escape(text)} — {html.escape(
        str(privacy.get("rule", "")))}</p>""" + (
        "" if note is None
        else f'\n<p class="warning" id="privacy-warning">{html.escape(note)}</p>')
