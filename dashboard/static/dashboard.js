/* ldp-telemetry dashboard: draws one metric's values over windows with the vendored uPlot
 * (static/uPlot.iife.min.js, loaded before this file), the rest as inline SVG, and, on a live
 * page, polls api/windows with a cursor for the panes that arrived since. No request to any
 * other host; every value from the data is set with textContent or an attribute, never parsed
 * as markup. It computes no statistic: a window's chart row carries its top values' estimates
 * and the bounds of their 95% bands as saved (not centred on a post-processed estimate), a
 * chosen window its bands (lower95, upper95, half95 per value), flags and smallest_resolvable,
 * all computed by the server
 * (dashboard/payload.py, dashboard/source.py); a chosen window's values are fetched then. */
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";
  var PALETTE = ["#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2", "#db2777",
                 "#65a30d", "#475569", "#ea580c"];
  var REASON_COLORS = ["#b91c1c", "#f97316", "#a16207", "#be185d", "#7f1d1d", "#9333ea"];
  var TIMING = {EARLY: {color: "#6b7280", name: "early"}, ON_TIME: {color: "#111827", name: "on time"},
                LATE: {color: "#ea580c", name: "late"}, UNKNOWN: {color: "#6b7280", name: "unknown"}};

  var state = JSON.parse(document.getElementById("ldp-data").textContent);
  var windows = [];
  var selectedKey = null;
  var userSelected = false;

  /* A window within the shown series (which fixes its configuration version), and the identity of
   * a window's estimate among every series (source.series_of). */
  function key(w) { return w.window_start + "|" + w.window_end; }
  function fullKey(w) { return key(w) + "|" + (w.version || ""); }
  function timingOf(w) { return (w.pane && w.pane.timing) || "ON_TIME"; }
  function paneIndex(w) { return (w.pane && w.pane.index) || 0; }
  function fmt(x, digits) { return (x === null || x === undefined) ? "\u2014" : Number(x).toFixed(digits === undefined ? 4 : digits); }
  /* A value to the digits its 95% half width supports (that half width to 2 significant
   * digits): 12.3456 ± 0.0234 is "12.346" and "0.023"; without one, 4 significant digits. */
  function byError(x, half) {
    if (x === null || x === undefined) { return "\u2014"; }
    if (typeof half !== "number" || !(half > 0) || !isFinite(half)) { return String(Number(Number(x).toPrecision(4))); }
    var decimals = Math.max(0, Math.min(12, 1 - Math.floor(Math.log10(half))));
    return Number(x).toFixed(decimals);
  }
  /* A record's band [lower, upper] of a numeric summary: its half width, and as text. */
  function bandHalf(band) { return band ? (band[1] - band[0]) / 2 : null; }
  function bandText(band) {
    var half = bandHalf(band);
    return "[" + byError(band[0], half) + ", " + byError(band[1], half) + "]";
  }
  function halfText(half) { return (typeof half === "number" && half > 0) ? String(Number(half.toPrecision(2))) : "\u2014"; }
  function count(x) { return (x === null || x === undefined) ? "\u2014" : Number(x).toLocaleString("en-US"); }
  function shortTime(iso) {
    return String(iso).replace("T", " ").replace(/:00(\.000)?Z$/, "").replace(/ 00:00$/, "").replace(/Z$/, "");
  }
  function rejectTotal(w) { var t = 0; for (var r in (w.rejects || {})) { t += w.rejects[r]; } return t; }
  /* The 95% band of value i of a window (valueBand). */
  function band(w, i) { return valueBand(w.estimate[i] || 0, (w.lower95 || [])[i], (w.upper95 || [])[i]); }
  /* A value drawn over windows: its estimate e and its band [low, high] as the record saved it,
   * which need not be centred on e (a post-processed value: docs/error-bars.md); without one,
   * banded is false and low = high = e. */
  function valueBand(e, low, high) {
    if (typeof low !== "number" || typeof high !== "number") { return {e: e, low: e, high: e, half: 0, banded: false}; }
    return {e: e, low: low, high: high, half: (high - low) / 2, banded: true};
  }
  /* A value's band as text: "± h" where e ± h prints as the band's own ends, else "[lower,
   * upper]"; "no band" where the record declares none. */
  function bandReadout(v) {
    if (!v.banded) { return "no band"; }
    if (fmt(v.e - v.half) === fmt(v.low) && fmt(v.e + v.half) === fmt(v.high)) { return "\u00b1 " + fmt(v.half); }
    return "[" + fmt(v.low) + ", " + fmt(v.high) + "]";
  }
  /* A value's band in a tooltip: bandReadout, "(95%)" after it only where it has one (a string
   * metric's heavy hitters, and a record declaring none, read "no band" alone). */
  function bandTitle(v) { return bandReadout(v) + (v.banded ? " (95%)" : ""); }

  function svgEl(tag, attrs, text) {
    var node = document.createElementNS(SVG, tag);
    for (var name in attrs) { node.setAttribute(name, attrs[name]); }
    if (text !== undefined) { node.textContent = text; }
    return node;
  }
  function htmlEl(tag, attrs, text) {
    var node = document.createElement(tag);
    for (var name in (attrs || {})) { node.setAttribute(name, attrs[name]); }
    if (text !== undefined) { node.textContent = text; }
    return node;
  }
  function tooltip(node, text) { node.appendChild(svgEl("title", {}, text)); return node; }
  function clear(node) { while (node.firstChild) { node.removeChild(node.firstChild); } }

  function niceTicks(low, high, wanted) {
    var span = high - low || 1;
    var step = Math.pow(10, Math.floor(Math.log10(span / wanted)));
    var err = span / wanted / step;
    step *= err >= 7.5 ? 10 : err >= 3.5 ? 5 : err >= 1.5 ? 2 : 1;
    var ticks = [];
    for (var t = Math.ceil(low / step) * step; t <= high + step * 1e-9; t += step) { ticks.push(Math.abs(t) < step * 1e-9 ? 0 : t); }
    return ticks;
  }

  /* A plot frame: scales, grid and y axis; returns helpers to draw inside. */
  function frame(svg, box, yLow, yHigh, yLabel, wanted, integers) {
    var y = function (v) { return box.top + box.height * (1 - (v - yLow) / (yHigh - yLow)); };
    var ticks = niceTicks(yLow, yHigh, wanted || 5);
    if (integers) { ticks = ticks.filter(function (t) { return Math.round(t) === t; }); }
    var digits = ticks.length > 1 ? Math.max(0, -Math.floor(Math.log10((ticks[1] - ticks[0]) || 1))) : 0;
    ticks.forEach(function (t) {
      svg.appendChild(svgEl("line", {x1: box.left, x2: box.left + box.width, y1: y(t), y2: y(t), "class": t === 0 ? "axis" : "grid"}));
      svg.appendChild(svgEl("text", {x: box.left - 6, y: y(t) + 4, "class": "tick", "text-anchor": "end"}, t.toFixed(digits)));
    });
    if (yLabel) {
      svg.appendChild(svgEl("text", {x: 12, y: box.top + box.height / 2, "class": "axis-label", "text-anchor": "middle",
                                     transform: "rotate(-90 12 " + (box.top + box.height / 2) + ")"}, yLabel));
    }
    return y;
  }

  function chartWidth(node, minimum) { return Math.max(minimum || 0, node.clientWidth || 900); }

  /* -- the rows of the page and of api/windows (dashboard/payload.py) into window objects -- */
  function isoOf(ms) { return new Date(ms).toISOString().replace(/\.000Z$/, "Z"); }
  /* A payload is sent by column: a column is its rows' values, or {all: value} for one value
   * in every row; `start` is the difference from the previous row's start (units of data.unit
   * ms); frequencies are integers in units of 1/data.scale. */
  function expand(data) {
    var count = data.count || 0, cols = {}, scale = data.scale || 1;
    (data.fields || []).forEach(function (name) {
      var column = (data.columns || {})[name];
      cols[name] = Array.isArray(column) ? column : null;
      if (!cols[name]) { var one = column ? column.all : null; cols[name] = {length: count, at: one}; }
    });
    function get(name, k) { var c = cols[name]; return Array.isArray(c) ? c[k] : c.at; }
    function freq(v) { return typeof v === "number" ? v / scale : null; }
    var seriesList = data.series || [], out = [], start = data.t0;
    for (var k = 0; k < count; k++) {
      var s = seriesList[get("series", k)] || {};
      /* a band as sent: low = estimate - lower, skew = (upper - e) - (e - lower), one number
       * for the row when its bands share it */
      var sent = get("top", k) || [], below = get("low", k) || [], skew = get("skew", k);
      var top = sent.map(freq);
      var lows = sent.map(function (e, r) { return typeof e === "number" && typeof below[r] === "number" ? freq(e - below[r]) : null; });
      var highs = sent.map(function (e, r) {
        var d = below[r], by = Array.isArray(skew) ? skew[r] : skew;
        return typeof e === "number" && typeof d === "number" && typeof by === "number" ? freq(e + d + by) : null;
      });
      start += get("start", k) * data.unit;
      var end = start + s.length_ms;
      var w = {window_start: isoOf(start), window_end: isoOf(end), start_ms: start, end_ms: end,
               version: s.version || "", series: s.name, n: get("n", k), late_reports: get("late", k),
               pane: {timing: data.timings[get("timing", k)], index: get("pane", k), is_last: !!get("last", k)},
               smallest_resolvable: freq(get("floor", k)), rejects: get("rejects", k) || {}, few: !!get("few", k),
               integrity_flag: get("integrity", k), partial: get("partial", k) || 0, light: true};
      var mean = get("mean", k);
      if (typeof mean === "number") {
        w.mean = mean;
        var low = get("mean_low", k), high = get("mean_high", k);
        w.mean_band = typeof low === "number" && typeof high === "number" ? [low, high] : null;
      }
      if (s.by_label && s.labels && s.labels.length) {  /* a string metric: in its labels' order */
        w.top = {by_label: true, labels: s.labels, estimate: top, lower95: lows, upper95: highs};
      } else if (s.indices && s.indices.length) {
        w.top = {indices: s.indices, labels: s.labels, estimate: top, lower95: lows, upper95: highs};
      }
      out.push(w);
    }
    return out;
  }
  /* A window flagged on its own: too few reports where its series mostly has enough (the advice
   * for the whole series is shown once, at the top of the page). */
  function fewHere(w) { return !!w.few && !seriesInfo(w.series).all_few; }
  function seriesInfo(name) { return (state.series || []).find(function (s) { return s.name === name; }) || {}; }

  /* -- series, partial windows, the URL ------------------------------------------------- */
  var allWindows = [];
  var series = null;            /* the series shown (window length; source.series_of) */
  var hidden = Object.create(null);  /* top-k labels hidden from the chart, by label (no
                                        * prototype: a label may be "constructor" or "__proto__") */
  var order = null;             /* "ranked" or "label" */
  var showAll = false;
  var fetching = {};

  function seriesNames() {
    var counts = {};
    allWindows.forEach(function (w) { counts[w.series] = (counts[w.series] || 0) + 1; });
    return Object.keys(counts).sort(function (a, b) { return counts[b] - counts[a] || (a < b ? -1 : 1); });
  }
  /* The partial windows, as the server decided them from the facts its runs recorded (the
   * watermark when a run stopped, the inputs' event-time range: output/coverage.py); a row's
   * `partial` indexes state.partials, 0 for a window that is not partial. */
  function flagPartial() { windows.forEach(function (w) { w._partial = !!w.partial; }); }
  function partialText(w) { return (state.partials || [])[w.partial] || "partial"; }
  function readHash() {
    var found = {};
    String(location.hash || "").replace(/^#/, "").split("&").forEach(function (part) {
      var i = part.indexOf("=");
      if (i > 0) { found[decodeURIComponent(part.slice(0, i))] = decodeURIComponent(part.slice(i + 1)); }
    });
    return found;
  }
  function writeHash() {
    if (!selectedKey) { return; }
    var text = "#series=" + encodeURIComponent(series || "") + "&window=" + encodeURIComponent(selectedKey);
    if (zoom) { text += "&from=" + encodeURIComponent(isoOf(zoom.min * 1000)) + "&to=" + encodeURIComponent(isoOf(zoom.max * 1000)); }
    if (!loaded.latest && allWindows.length) {
      text += "&page=" + encodeURIComponent(isoOf(allWindows[0].start_ms)) + "&page_end=" + encodeURIComponent(isoOf(allWindows[allWindows.length - 1].start_ms));
    }
    if (location.hash !== text) { try { history.replaceState(null, "", text); } catch (e) { /* file: pages */ } }
  }
  function dateText(iso, withTime) {
    var t = String(iso).replace("T", " ").replace(/(\.000)?Z$/, "");
    return withTime ? t.replace(/:00$/, "") : t.slice(0, 10);
  }
  function needsTime() { return windows.some(function (w) { return !/T00:00:00(\.000)?Z$/.test(w.window_start); }); }
  /* Indices of the windows whose tick labels fit without overlapping (`px` per label). */
  function tickIndices(count, width, px) {
    var every = Math.max(1, Math.ceil(count * px / Math.max(1, width)));
    var out = [];
    for (var k = 0; k < count; k += every) { out.push(k); }
    return out;
  }
  /* Time labels under a chart at round times (whole hours, days, weeks, months: the smallest
   * step whose labels fit), never overlapping and never cut at the edges. */
  var TICK_STEPS = [[60e3, 1], [5 * 60e3, 1], [15 * 60e3, 1], [30 * 60e3, 1], [36e5, 1], [2 * 36e5, 1], [3 * 36e5, 1],
                    [6 * 36e5, 1], [12 * 36e5, 1], [864e5, 0], [2 * 864e5, 0], [7 * 864e5, 0], [14 * 864e5, 0],
                    [28 * 864e5, 0], [91 * 864e5, 0], [364 * 864e5, 0]];
  function startMs(w) { return typeof w.start_ms === "number" ? w.start_ms : Date.parse(w.window_start); }
  function timeTicks(svg, box, count, xOf, y) {
    var withTime = needsTime();
    var px = (withTime ? 16 : 10) * 7 + 16;
    if (!count) { return; }
    var first = startMs(windows[0]), last = startMs(windows[count - 1]);
    var span = Math.max(1, last - first), chosen = TICK_STEPS[TICK_STEPS.length - 1];
    for (var s = 0; s < TICK_STEPS.length; s++) {
      if ((span / TICK_STEPS[s][0]) * px <= box.width) { chosen = TICK_STEPS[s]; break; }
    }
    /* hours: multiples of the step (UTC); days: midnights, every step-th day from the first
     * window's (weekly ticks fall on the windows' own weekday) */
    var step = chosen[0], days = step >= 864e5, firstDay = Math.ceil(first / 864e5) * 864e5;
    var lowest = 4, highest = box.left + box.width + 20, lastRight = -Infinity;
    windows.forEach(function (w, k) {
      var t = startMs(w);
      var round = days ? t % 864e5 === 0 && (t - firstDay) % step === 0 : t % step === 0;
      if (!round) { return; }
      var centre = Math.min(highest - px / 2, Math.max(lowest + px / 2, xOf(k)));
      if (centre - (px - 16) / 2 < lastRight + 12) { return; }
      lastRight = centre + (px - 16) / 2;
      svg.appendChild(svgEl("text", {x: centre, y: y, "class": "tick time-tick", "text-anchor": "middle"}, dateText(w.window_start, withTime && chosen[1] === 1)));
    });
    if (lastRight === -Infinity) {  /* no window starts at a round time: label the first */
      svg.appendChild(svgEl("text", {x: Math.max(lowest + px / 2, xOf(0)), y: y, "class": "tick time-tick", "text-anchor": "middle"}, dateText(windows[0].window_start, withTime)));
    }
  }

  /* A window's value of a line of the top-k chart (its `top` subset, or its whole arrays). A
   * line of a series keyed by label (a string metric) is found by its label: null where the
   * window's heavy hitters lack it (not found above the threshold: a gap, not 0). */
  function topValue(w, line) {
    if (line.byLabel) { return labelValue(w, line.label); }
    var i = line.index;
    if (w.top && w.top.indices) {
      var at = w.top.indices.indexOf(i);
      if (at >= 0) { return valueBand(w.top.estimate[at], (w.top.lower95 || [])[at], (w.top.upper95 || [])[at]); }
    }
    if (!w.estimate) { return null; }
    return valueBand(w.estimate[i] || 0, (w.lower95 || [])[i], (w.upper95 || [])[i]);
  }
  function labelValue(w, label) {
    var at, e;
    if (w.estimate && w.labels) {  /* the whole window: its own heavy hitters */
      at = w.labels.indexOf(label);
      if (at < 0) { return null; }
      return valueBand(w.estimate[at], (w.lower95 || [])[at], (w.upper95 || [])[at]);
    }
    at = w.top && w.top.by_label ? w.top.labels.indexOf(label) : -1;
    e = at < 0 ? null : w.top.estimate[at];
    if (typeof e !== "number") { return null; }
    return valueBand(e, w.top.lower95[at], w.top.upper95[at]);
  }
  /* Whether a window is known not to hold `label` among its heavy hitters (whole, or its
   * chart row was sent with that label). */
  function knownAbsent(w, label) {
    if (w.estimate && w.labels) { return w.labels.indexOf(label) < 0; }
    return !!(w.top && w.top.by_label && w.top.labels.indexOf(label) >= 0);
  }
  function topLabels() {
    var info = seriesInfo(series);
    if (info.by_label) { return (info.labels || []).map(function (label, r) { return {index: r, label: label, byLabel: true}; }); }
    if (info.indices && info.indices.length) { return info.indices.map(function (i, r) { return {index: i, label: info.labels[r]}; }); }
    var w = windows.find(function (v) { return v.top && v.top.indices; });
    if (w) { return w.top.indices.map(function (i, r) { return {index: i, label: w.top.labels[r]}; }); }
    var totals = {};
    windows.forEach(function (v) { (v.estimate || []).forEach(function (e, i) { totals[i] = (totals[i] || 0) + (e || 0); }); });
    var first = windows.find(function (v) { return v.labels; }) || {labels: []};
    return Object.keys(totals).map(Number).sort(function (a, b) { return totals[b] - totals[a] || a - b; })
      .slice(0, state.top_k).map(function (i) { return {index: i, label: first.labels[i]}; });
  }

  /* -- over windows: the top-k values (toggleable, hover read-out), or a numeric mean -------- */
  /* Drawn by uPlot (dashboard/static/uPlot.iife.min.js, vendored, MIT): every window is a point,
   * time on x (UTC, round hours and days), the 95% band of the value in focus filled, y from what
   * is drawn in the visible time range. Drag over the chart zooms to a time range, double-click
   * resets; a click chooses the window under the cursor. The zoom is kept in the URL. */
  var chart = null;             /* the uPlot instance drawn last */
  var zoom = null;              /* the visible time range {min, max} in s, or null for all */
  var chartDrawn = null;        /* what the chart drawn last shows (chartState) */
  var chartSelected = -1;       /* the chosen window's index in it, highlighted */
  var dataVersion = 0;          /* bumped when a window or a newer pane of one arrives */
  /* What the chart shows apart from the chosen window: when only that changes, the chart is
   * redrawn in place (a drag or double-click in progress survives a re-render). */
  function chartState(width) {
    return JSON.stringify([dataVersion, series, windows.length, hidden, state.focus || null, width]);
  }
  function rgba(hex, alpha) {
    var n = parseInt(hex.slice(1), 16);
    return "rgba(" + (n >> 16) + "," + ((n >> 8) & 255) + "," + (n & 255) + "," + alpha + ")";
  }
  function fillReadout(readout, w, lines, at) {
    clear(readout);
    readout.style.visibility = "";
    readout.appendChild(htmlEl("strong", {}, shortTime(w.window_start) + " \u2013 " + shortTime(w.window_end) + "  n = " + count(w.n) + (w._partial ? " (partial)" : "")));
    lines.forEach(function (line, rank) {
      var v = at(w, line);
      if (hidden[line.label]) { return; }
      if (!v && line.byLabel && knownAbsent(w, line.label)) {  /* its heavy hitters lack it */
        var absent = htmlEl("span", {"class": "readout-item absent"}, String(line.label) + " not found");
        absent.style.color = PALETTE[rank % PALETTE.length];
        readout.appendChild(absent);
        return;
      }
      if (!v) { return; }
      var span = htmlEl("span", {"class": "readout-item"}, String(line.label) + " " + fmt(v.e) + " " + bandReadout(v));
      span.style.color = PALETTE[rank % PALETTE.length];
      readout.appendChild(span);
    });
  }
  /* A tick at t s (UTC) of a time axis whose ticks are `step` s apart: dates at midnights,
   * hours in between, months for steps of a month or more. */
  function timeLabel(t, step) {
    var iso = isoOf(t * 1000);
    if (step >= 86400 || t % 86400 === 0) { return step >= 28 * 86400 ? iso.slice(0, 7) : iso.slice(0, 10); }
    return iso.slice(11, 16);
  }
  /* The ticks of the time axis over [low, high] s, `space` px apart at least on `width` px: the
   * smallest round step whose ticks fit — minutes, whole UTC hours (1, 2, 3, 6, 12), days (1, 2),
   * weeks (1, 2: Mondays), months (1, 3) or years — every tick a multiple of its step. */
  var AXIS_STEPS = [60, 300, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800,
                    7 * 86400, 14 * 86400, "1mo", "3mo", "1y"];
  function axisTicks(low, high, width, space) {
    var span = Math.max(1, high - low), wanted = Math.max(1, Math.floor(width / space));
    var chosen = AXIS_STEPS[AXIS_STEPS.length - 1];
    for (var s = 0; s < AXIS_STEPS.length; s++) {
      var size = typeof AXIS_STEPS[s] === "number" ? AXIS_STEPS[s] : AXIS_STEPS[s] === "1mo" ? 30.4 * 86400 : AXIS_STEPS[s] === "3mo" ? 91.3 * 86400 : 365.2 * 86400;
      if (span / size <= wanted) { chosen = AXIS_STEPS[s]; break; }
    }
    var ticks = [], t;
    if (typeof chosen === "number") {
      var offset = chosen >= 7 * 86400 ? 4 * 86400 : 0;  /* weeks from a Monday (1970-01-05) */
      for (t = Math.ceil((low - offset) / chosen) * chosen + offset; t <= high; t += chosen) { ticks.push(t); }
      return {ticks: ticks, step: chosen};
    }
    var months = chosen === "1mo" ? 1 : chosen === "3mo" ? 3 : 12, at = new Date(low * 1000);
    var month = at.getUTCFullYear() * 12 + at.getUTCMonth();
    month = Math.ceil(month / months) * months;
    for (;; month += months) {
      t = Date.UTC(Math.floor(month / 12), month % 12, 1) / 1000;
      if (t < low) { continue; }
      if (t > high) { break; }
      ticks.push(t);
    }
    return {ticks: ticks, step: months * 30.4 * 86400};
  }
  /* What the chart of a series keyed by label (a string metric) draws, said under it. */
  function drawLabelNote() {
    var note = document.getElementById("topk-note"), info = seriesInfo(series);
    if (!note) { return; }
    note.hidden = !info.by_label;
    note.textContent = !info.by_label ? "" :
      "The strings with the largest mean estimate over this series' windows (a window whose heavy hitters lack a string counts 0 in that mean). " +
      "A gap in a line is a window where the string was not found above the heavy-hitter threshold, not a frequency of 0 measured." +
      (info.labels_cut ? " This series has more distinct strings than the dashboard ranks: the top strings are chosen among those seen most recently." : "");
  }
  function drawTopK() {
    var holder = document.getElementById("topk"), legend = document.getElementById("topk-legend");
    var readout = document.getElementById("topk-readout");
    var selectedAt = windows.findIndex(function (w) { return key(w) === selectedKey; });
    var width = chartWidth(holder), drawn = chartState(width);
    chartSelected = selectedAt;
    if (chart && drawn === chartDrawn) { chart.redraw(false); return; }
    if (chart) { chart.destroy(); chart = null; }
    chartDrawn = drawn;
    clear(holder); clear(legend);
    readout.style.visibility = "hidden";  /* its height kept: the legend stays where it is */
    drawLabelNote();
    if (!windows.length) { holder.appendChild(htmlEl("p", {"class": "empty"}, "No windows yet.")); return; }
    var lines = state.numeric ? [{index: -1, label: "mean"}] : topLabels();
    var valueOf = state.numeric ? function (w) {
      if (typeof w.mean !== "number") { return null; }
      var b = w.mean_band;  /* the record's own band, which need not be centred on the mean */
      return b ? valueBand(w.mean, b[0], b[1]) : valueBand(w.mean, null, null);
    } : null;
    function at(w, line) { return valueOf ? valueOf(w) : topValue(w, line); }
    var visible = lines.filter(function (l) { return !hidden[l.label]; });
    /* the band of the value in focus is drawn (the first, largest one unless the legend says
     * otherwise) */
    var focus = visible.length === 1 ? visible[0].label : (state.focus || (visible[0] && visible[0].label));
    var xs = windows.map(function (w) { return startMs(w) / 1000; });
    var data = [xs], series = [{}], bands = [];
    lines.forEach(function (line, rank) {
      var color = PALETTE[rank % PALETTE.length], dimmed = state.focus && state.focus !== line.label;
      var values = windows.map(function (w) { var v = at(w, line); return v ? v.e : null; });
      /* a string found in lone windows is a point between gaps: drawn as points */
      var lone = values.some(function (v, k) { return v !== null && (k === 0 || values[k - 1] === null) && (k === values.length - 1 || values[k + 1] === null); });
      data.push(values);
      series.push({label: String(line.label), show: !hidden[line.label], stroke: dimmed ? rgba(color, 0.45) : color,
                   width: dimmed ? 1.2 : 2, spanGaps: false,
                   points: {show: windows.length <= 120 || lone, size: windows.length <= 120 ? 6 : 4, fill: color, stroke: color}});
      if (focus === line.label && !hidden[line.label]) {
        var main = data.length - 1;
        /* a window whose record declares no band leaves a gap in the fill, not a band of width 0 */
        var highs = windows.map(function (w) { var v = at(w, line); return v && v.banded ? (state.numeric ? v.high : Math.max(0, v.high)) : null; });
        data.push(highs);
        series.push({label: line.label + " upper 95%", stroke: "transparent", width: 0, points: {show: false}});
        data.push(windows.map(function (w) { var v = at(w, line); return v && v.banded ? (state.numeric ? v.low : Math.max(0, v.low)) : null; }));
        series.push({label: line.label + " lower 95%", stroke: "transparent", width: 0, points: {show: false}});
        bands.push({series: [main + 1, main + 2], fill: rgba(color, 0.18)});
        holder.setAttribute("data-band", String(line.label));
        holder.setAttribute("data-banded-windows", String(highs.filter(function (h) { return h !== null; }).length));
      }
    });
    if (!bands.length) { holder.removeAttribute("data-band"); holder.removeAttribute("data-banded-windows"); }
    var downX = null, axisStep = 3600;
    var options = {
      width: width, height: 300, legend: {show: false}, bands: bands, series: series,
      padding: [12, 44, 0, 0],  /* room for the last time label */
      tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"); },
      cursor: {drag: {x: true, y: false, setScale: true}, points: {show: false}},
      scales: {x: {time: true}, y: {range: function (u, low, high) {
        /* what is drawn, padded; a frequency axis starts at 0 */
        if (low === null || high === null) { return [0, 1]; }
        if (!state.numeric) { low = Math.min(0, low); if (high <= 0) { high = 0.05; } }
        var pad = (high - low) * 0.08 || 0.01;
        return [state.numeric ? low - pad : low, high + pad];
      }}},
      axes: [{label: "window start (UTC)", labelSize: 20, stroke: "#374151", grid: {stroke: "#e5e7eb"}, space: 90,
              splits: function (u, axis, low, high) {
                var found = axisTicks(low, high, u.bbox.width / (window.devicePixelRatio || 1), 90);
                axisStep = found.step;
                holder.setAttribute("data-x-ticks", found.ticks.map(function (t) { return isoOf(t * 1000); }).join(" "));
                return found.ticks;
              },
              values: function (u, splits) { return splits.map(function (t) { return timeLabel(t, axisStep); }); }},
             {label: state.numeric ? "mean (metric units)" : "frequency", stroke: "#374151", grid: {stroke: "#e5e7eb"}, size: 60}],
      hooks: {
        drawClear: [function (u) {  /* the chosen window, under the lines */
          if (chartSelected < 0 || !windows[chartSelected]) { return; }
          var w = windows[chartSelected], ctx = u.ctx;
          var left = u.valToPos(startMs(w) / 1000, "x", true), right = u.valToPos(w.end_ms ? w.end_ms / 1000 : startMs(w) / 1000, "x", true);
          ctx.save();
          ctx.fillStyle = "rgba(37, 99, 235, 0.12)";
          ctx.fillRect(Math.min(left, right - 2), u.bbox.top, Math.max(2, right - left), u.bbox.height);
          ctx.restore();
        }],
        draw: [function (u) {  /* EARLY and LATE panes: a mark under their window (an open
                                  * circle, a triangle), in the colours of the pane timings */
          var ctx = u.ctx, ratio = window.devicePixelRatio || 1, marked = 0;
          var y = u.bbox.top + u.bbox.height - 7 * ratio, r = 4 * ratio;
          ctx.save();
          ctx.lineWidth = 1.5 * ratio;
          windows.forEach(function (w) {
            var timing = timingOf(w), t = startMs(w) / 1000;
            if ((timing !== "EARLY" && timing !== "LATE") || t < u.scales.x.min || t > u.scales.x.max) { return; }
            var x = u.valToPos(t, "x", true);
            ctx.beginPath();
            if (timing === "EARLY") {
              ctx.strokeStyle = TIMING.EARLY.color; ctx.arc(x, y, r, 0, 2 * Math.PI); ctx.stroke();
            } else {
              ctx.fillStyle = TIMING.LATE.color; ctx.moveTo(x, y - r); ctx.lineTo(x + r, y + r); ctx.lineTo(x - r, y + r); ctx.closePath(); ctx.fill();
            }
            marked++;
          });
          ctx.restore();
          holder.setAttribute("data-pane-markers", String(marked));
        }],
        setCursor: [function (u) {
          var k = u.cursor.idx;
          if (k === null || k === undefined || !windows[k]) { return; }
          fillReadout(readout, windows[k], lines, at);
        }],
        setScale: [function (u, scale) {
          if (scale !== "x") { return; }
          var min = u.scales.x.min, max = u.scales.x.max;
          zoom = (min <= xs[0] && max >= xs[xs.length - 1]) ? null : {min: min, max: max};
          var resetNode = document.getElementById("topk-reset");
          if (resetNode) { resetNode.hidden = !zoom; }
          holder.setAttribute("data-x-min", isoOf(min * 1000));
          holder.setAttribute("data-x-max", isoOf(max * 1000));
          writeHash();
        }]
      }
    };
    var wanted = zoom;            /* the hook sees the full range first */
    chart = new uPlot(options, data, holder);
    if (wanted) { chart.setScale("x", {min: wanted.min, max: wanted.max}); }
    holder.setAttribute("data-x-min", isoOf(chart.scales.x.min * 1000));
    holder.setAttribute("data-x-max", isoOf(chart.scales.x.max * 1000));
    chart.over.addEventListener("mousedown", function (event) { downX = event.clientX; });
    chart.over.addEventListener("click", function (event) {
      var k = chart.cursor.idx;
      if (downX === null || Math.abs(event.clientX - downX) > 3 || k === null || k === undefined || !windows[k]) { return; }
      /* after the click is handled: a second click of a double-click (which resets the zoom)
       * is then never held behind the page's redraw */
      var picked = key(windows[k]);
      setTimeout(function () { select(picked, true); }, 0);
    });
    /* hidden, not emptied: the legend under it does not move up as the pointer goes to it */
    chart.over.addEventListener("mouseleave", function () { readout.style.visibility = "hidden"; });
    lines.forEach(function (line, rank) {
      var color = PALETTE[rank % PALETTE.length];
      var item = htmlEl("button", {type: "button", "class": "legend-item toggle" + (hidden[line.label] ? " off" : ""), "data-label": line.label, "aria-pressed": hidden[line.label] ? "false" : "true"});
      var swatch = htmlEl("span", {"class": "swatch"});
      swatch.style.background = color;
      item.appendChild(swatch);
      item.appendChild(document.createTextNode(String(line.label)));
      item.addEventListener("click", function () { hidden[line.label] = !hidden[line.label]; drawTopK(); });
      item.addEventListener("mouseenter", function () { state.focus = line.label; drawTopK(); });
      item.addEventListener("mouseleave", function () { state.focus = null; drawTopK(); });
      legend.appendChild(item);
    });
    [["EARLY", "\u25cb early pane (the window still open)"], ["LATE", "\u25b2 late pane (reports after the watermark)"]].forEach(function (pair) {
      if (!windows.some(function (w) { return timingOf(w) === pair[0]; })) { return; }
      var note = htmlEl("span", {"class": "legend-item pane-mark", "data-timing": pair[0]}, pair[1]);
      note.style.color = TIMING[pair[0]].color;
      legend.appendChild(note);
    });
    var reset = htmlEl("button", {type: "button", "class": "legend-item", id: "topk-reset"}, "all windows");
    reset.hidden = !zoom;
    reset.addEventListener("click", function () { zoom = null; drawTopK(); writeHash(); });
    legend.appendChild(reset);
  }

  /* -- the selected window: ranked bars (or label order), a numeric density ----------------- */
  function quantilePairs(w) {
    return Object.keys(w.quantiles || {}).map(function (level) { return [Number(level), w.quantiles[level], (w.quantile_bands || {})[level] || null, (w.conservative_quantile_bands || {})[level] || null]; })
      .filter(function (pair) { return typeof pair[1] === "number"; }).sort(function (a, b) { return a[0] - b[0]; });
  }
  /* Labels that are all integers (a string metric's heavy hitters are always ranked) */
  function isOrdinal(w) { return !w.heavy_hitters && (w.labels || []).every(function (l) { return /^-?\d+$/.test(String(l)); }); }

  function drawDistribution(w) {
    if (order === null && w.estimate && w.estimate.length) {  /* decided by the first window whose values are loaded */
      order = isOrdinal(w) ? "label" : "ranked";
      var orderSelect = document.getElementById("order-select");
      if (orderSelect) { orderSelect.value = order; }
    }
    var holder = document.getElementById("distribution");
    clear(holder); clear(document.getElementById("quantiles"));
    if (w.bucket_edges) { drawDensity(w, holder); drawQuantiles(w); return; }
    var showAllButton = document.getElementById("show-all");
    if (!w.estimate.length) {  /* a string metric's window without heavy hitters */
      if (showAllButton) { showAllButton.hidden = true; }
      holder.appendChild(htmlEl("p", {"class": "empty"}, "No values in this window" +
        (w.heavy_hitters ? ": no string was found above the heavy-hitter threshold" + (w.heavy_hitters.reason ? " (" + String(w.heavy_hitters.reason) + ")" : "") : "") + "."));
      return;
    }
    if (order === "label") { drawInOrder(w, holder); if (showAllButton) { showAllButton.hidden = true; } return; }
    var d = w.estimate.length;
    var ranked = w.estimate.map(function (_, i) { return i; }).sort(function (a, b) { return w.estimate[b] - w.estimate[a] || a - b; });
    var rows = showAll ? d : Math.min(d, 20);
    if (showAllButton) {
      showAllButton.hidden = d <= 20;
      showAllButton.textContent = showAll ? "top 20 only" : "all " + d.toLocaleString("en-US") + " values";
    }
    var width = chartWidth(holder), rowH = 20;
    var longest = Math.min(22, Math.max.apply(null, ranked.slice(0, rows).map(function (i) { return String(w.labels[i]).length; })));
    var left = 16 + 7 * longest, right = 150;
    var box = {left: left, top: 22, width: width - left - right, height: rows * rowH};
    var height = box.top + box.height + 34;
    var svg = svgEl("svg", {width: width, height: height, viewBox: "0 0 " + width + " " + height, role: "img", "aria-label": "distribution of the selected window, ranked"});
    var high = 1e-9;
    ranked.slice(0, rows).forEach(function (i) { high = Math.max(high, band(w, i).high); });
    var floorLine = w.smallest_resolvable || null;
    if (floorLine) { high = Math.max(high, floorLine); }
    high *= 1.05;
    var x = function (v) { return box.left + box.width * Math.max(0, v) / high; };
    niceTicks(0, high, 6).forEach(function (t) {
      svg.appendChild(svgEl("line", {x1: x(t), x2: x(t), y1: box.top, y2: box.top + box.height, "class": "grid"}));
      svg.appendChild(svgEl("text", {x: x(t), y: box.top + box.height + 14, "class": "tick", "text-anchor": "middle"}, String(Number(t.toPrecision(3)))));
    });
    svg.appendChild(svgEl("text", {x: box.left + box.width / 2, y: height - 4, "class": "axis-label", "text-anchor": "middle"}, "estimated frequency" + (ranked.slice(0, rows).some(function (i) { return band(w, i).banded; }) ? ", 95% band" : " (no band)")));
    ranked.slice(0, rows).forEach(function (i, r) {
      var b = band(w, i), e = w.estimate[i], top = box.top + r * rowH;
      var unresolved = floorLine && e < floorLine;
      var name = String(w.labels[i]);
      svg.appendChild(svgEl("text", {x: box.left - 8, y: top + 14, "class": "tick category bar-label", "text-anchor": "end"}, name.length > 22 ? name.slice(0, 21) + "\u2026" : name));
      var bar = svgEl("rect", {x: box.left, y: top + 3, width: Math.max(1, x(e) - box.left), height: rowH - 6, "class": "bar ranked" + (unresolved ? " unresolved" : ""), "data-index": String(i)});
      svg.appendChild(tooltip(bar, name + ": " + fmt(e) + " " + bandTitle(b) + (unresolved ? ", below the smallest resolvable frequency" : "")));
      if (b.half > 0) {
        var mid = top + rowH / 2;
        svg.appendChild(svgEl("line", {x1: x(b.low), x2: x(b.high), y1: mid, y2: mid, "class": "errorbar"}));
        svg.appendChild(svgEl("line", {x1: x(b.low), x2: x(b.low), y1: mid - 4, y2: mid + 4, "class": "errorbar"}));
        svg.appendChild(svgEl("line", {x1: x(b.high), x2: x(b.high), y1: mid - 4, y2: mid + 4, "class": "errorbar"}));
      }
      svg.appendChild(svgEl("text", {x: box.left + box.width + 10, y: top + 14, "class": "tick value-text" + (unresolved ? " unresolved" : "")}, fmt(e) + " " + bandReadout(b)));
    });
    if (floorLine) {
      svg.appendChild(svgEl("line", {x1: x(floorLine), x2: x(floorLine), y1: box.top - 4, y2: box.top + box.height, "class": "floor"}));
      svg.appendChild(svgEl("text", {x: x(floorLine), y: box.top - 8, "class": "floor-label", "text-anchor": x(floorLine) > box.left + box.width / 2 ? "end" : "start"}, "smallest resolvable " + fmt(floorLine) + ": values below it (grey) are noise at 2 s.e."));
    }
    holder.appendChild(svg);
  }

  function drawInOrder(w, holder) {
    var d = w.estimate.length;
    var width = chartWidth(holder);
    var longest = Math.min(14, Math.max.apply(null, w.labels.map(function (l) { return String(l).length; })));
    var labelRoom = 14 + 5.6 * longest, height = 290 + labelRoom;
    var box = {left: 58, top: 16, width: width - 58 - 18, height: height - 16 - labelRoom - 22};
    var svg = svgEl("svg", {width: width, height: height, viewBox: "0 0 " + width + " " + height, role: "img", "aria-label": "distribution of the selected window, in label order"});
    var high = 1e-9;
    for (var i = 0; i < d; i++) { high = Math.max(high, band(w, i).high); }
    var floorLine = w.smallest_resolvable || null;
    if (floorLine) { high = Math.max(high, floorLine); }
    var y = frame(svg, box, 0, high * 1.08, "frequency");
    var barWidth = box.width / d;
    var labelEvery = Math.max(1, Math.ceil(13 / barWidth));
    for (var j = 0; j < d; j++) {
      var b = band(w, j), left = box.left + j * barWidth, mid = left + barWidth / 2, e = w.estimate[j];
      var unresolved = floorLine && e < floorLine;
      svg.appendChild(tooltip(svgEl("rect", {x: left + Math.min(1, barWidth * 0.1), y: y(Math.max(0, e)), width: Math.max(0.5, barWidth - 2 * Math.min(1, barWidth * 0.1)), height: Math.max(0.5, y(0) - y(Math.max(0, e))), "class": "bar" + (unresolved ? " unresolved" : "")}), w.labels[j] + ": " + fmt(e) + " " + bandTitle(b)));
      if (b.half > 0 && barWidth >= 3) { svg.appendChild(svgEl("line", {x1: mid, x2: mid, y1: y(b.high), y2: y(Math.max(0, b.low)), "class": "errorbar"})); }
      if (j % labelEvery === 0) {
        var ty = box.top + box.height + 10, name = String(w.labels[j]);
        svg.appendChild(svgEl("text", {x: mid, y: ty, "class": "tick category", "text-anchor": "end", transform: "rotate(-60 " + mid + " " + ty + ")"}, name.length > 14 ? name.slice(0, 13) + "\u2026" : name));
      }
    }
    if (floorLine) {
      svg.appendChild(svgEl("line", {x1: box.left, x2: box.left + box.width, y1: y(floorLine), y2: y(floorLine), "class": "floor"}));
      svg.appendChild(svgEl("text", {x: box.left + box.width - 4, y: y(floorLine) - 5, "class": "floor-label", "text-anchor": "end"}, "smallest resolvable: " + fmt(floorLine)));
    }
    holder.appendChild(svg);
  }

  /* A numeric window: density bars with their 95% band as one shaded step area. */
  function drawDensity(w, holder) {
    var edges = w.bucket_edges, d = w.estimate.length;
    var bars = [];
    for (var i = 0; i < d; i++) {
      var widthB = (edges[i + 1] - edges[i]) || 1, b = band(w, i);
      bars.push({v: w.estimate[i] / widthB, low: Math.max(0, b.low / widthB), high: b.high / widthB, half: b.half / widthB});
    }
    var high = Math.max(1e-12, Math.max.apply(null, bars.map(function (b) { return b.high; })));
    var width = chartWidth(holder), height = 300;
    var box = {left: 140, top: 16, width: width - 140 - 64, height: height - 16 - 52};
    var svg = svgEl("svg", {width: width, height: height, viewBox: "0 0 " + width + " " + height, role: "img", "aria-label": "density of the selected window"});
    var y = frame(svg, box, 0, high * 1.08, "density (per unit)");
    var x0 = edges[0], x1 = edges[d];
    var x = function (value) { return box.left + box.width * (value - x0) / ((x1 - x0) || 1); };
    niceTicks(x0, x1, 8).forEach(function (t) {
      svg.appendChild(svgEl("text", {x: x(t), y: box.top + box.height + 16, "class": "tick", "text-anchor": "middle"}, String(Number(t.toPrecision(4)))));
    });
    svg.appendChild(svgEl("text", {x: box.left + box.width / 2, y: height - 6, "class": "axis-label", "text-anchor": "middle"}, "value of " + state.metric_shown + " (the metric's units)"));
    var upper = [], lower = [];
    bars.forEach(function (b, i) {
      var left = x(edges[i]), right = x(edges[i + 1]);
      svg.appendChild(tooltip(svgEl("rect", {x: left, y: y(Math.max(0, b.v)), width: Math.max(0.5, right - left), height: Math.max(0.5, y(0) - y(Math.max(0, b.v))), "class": "bar density"}), "[" + edges[i] + ", " + edges[i + 1] + "): " + fmt(w.estimate[i]) + " " + bandTitle(band(w, i))));
      upper.push(left + "," + y(b.high), right + "," + y(b.high));
      lower.unshift(left + "," + y(b.low), right + "," + y(b.low));
    });
    svg.appendChild(svgEl("polygon", {points: upper.concat(lower).join(" "), "class": "density-band"}));
    holder.appendChild(svg);
    state.densityX = {x0: x0, x1: x1, left: box.left, width: box.width};
  }

  /* The mean and each quantile on its own row, with its 95% interval, on the density's x axis. */
  function drawQuantiles(w) {
    var holder = document.getElementById("quantiles");
    var rows = [];
    if (typeof w.mean === "number") { rows.push({label: "mean = " + byError(w.mean, bandHalf(w.mean_band || w.conservative_mean_band)), value: w.mean, band: w.mean_band, conservative: w.mean_band ? null : (w.conservative_mean_band || null), cls: "mean"}); }
    quantilePairs(w).forEach(function (p) { rows.push({label: "q" + Number((p[0] * 100).toPrecision(3)) + " = " + byError(p[1], bandHalf(p[2] || p[3])), value: p[1], band: p[2], conservative: p[2] ? null : p[3], cls: "quantile"}); });
    if (!rows.length) { return; }
    var geo = state.densityX, width = chartWidth(holder), rowH = 22;
    var height = rows.length * rowH + 12;
    var svg = svgEl("svg", {width: width, height: height, viewBox: "0 0 " + width + " " + height, role: "img", "aria-label": "mean and quantiles with 95% intervals"});
    var x = function (v) { return geo.left + geo.width * (Math.min(geo.x1, Math.max(geo.x0, v)) - geo.x0) / ((geo.x1 - geo.x0) || 1); };
    rows.forEach(function (row, r) {
      var mid = 8 + r * rowH + rowH / 2;
      svg.appendChild(svgEl("line", {x1: geo.left, x2: geo.left + geo.width, y1: mid, y2: mid, "class": "grid"}));
      var text = svgEl("text", {x: geo.left - 8, y: mid + 4, "class": row.cls + "-label", "text-anchor": "end"}, row.label);
      svg.appendChild(text);
      if (row.band && row.band[1] > row.band[0]) {  /* the record's band: [lower, upper] */
        var bar = svgEl("line", {x1: x(row.band[0]), x2: x(row.band[1]), y1: mid, y2: mid, "class": row.cls + "-interval"});
        svg.appendChild(tooltip(bar, row.label + ", 95% band " + bandText(row.band)));
        row.band.forEach(function (v) {
          svg.appendChild(svgEl("line", {x1: x(v), x2: x(v), y1: mid - 5, y2: mid + 5, "class": row.cls + "-interval"}));
        });
        svg.appendChild(svgEl("text", {x: geo.left + geo.width + 4, y: mid + 4, "class": "tick interval-text"}, bandText(row.band)));
      } else if (row.conservative && row.conservative[1] > row.conservative[0]) {  /* not a 95% band: dashed, named */
        var held = svgEl("line", {x1: x(row.conservative[0]), x2: x(row.conservative[1]), y1: mid, y2: mid, "class": "conservative-interval"});
        svg.appendChild(tooltip(held, row.label + ", no 95% band; " + bandText(row.conservative) + " conservative (" + state.conservative_note + ")"));
        svg.appendChild(svgEl("text", {x: geo.left + geo.width + 4, y: mid + 4, "class": "tick interval-text"}, bandText(row.conservative) + " conservative"));
      } else {
        svg.appendChild(svgEl("text", {x: geo.left + geo.width + 4, y: mid + 4, "class": "tick interval-text"}, "no band"));
      }
      svg.appendChild(svgEl("circle", {cx: x(row.value), cy: mid, r: 4, "class": row.cls + "-point"}));
    });
    holder.appendChild(svg);
  }

  function drawValues(w) {
    var holder = document.getElementById("values");
    clear(holder);
    var table = htmlEl("table", {"class": "grid", id: "values-table"});
    var head = htmlEl("thead"), row = htmlEl("tr");
    /* a string window decoded against a candidate dictionary: how each heavy hitter was found
     * (heavy_hitters.found_by, in the record's labels order; value_indices map a cut view) */
    var foundBy = (w.heavy_hitters && w.heavy_hitters.found_by && w.heavy_hitters.found_by.length) ? w.heavy_hitters.found_by : null;
    var columns = [["#", "num"], ["value", ""], ["estimate", "num"], ["95% band", "num"], ["unbiased", "num"], ["std. error", "num"]];
    if (foundBy) { columns.push(["found by", ""]); }
    columns.forEach(function (t) { row.appendChild(htmlEl("th", t[1] ? {"class": t[1]} : {}, t[0])); });
    head.appendChild(row);
    table.appendChild(head);
    var body = htmlEl("tbody");
    var se = w.std_error || [], raw = w.unbiased_estimate || [];
    var order = w.estimate.map(function (_, i) { return i; });
    /* a string metric's heavy hitters in the record's own rank; other values by estimate */
    if (!w.heavy_hitters) { order.sort(function (a, b) { return w.estimate[b] - w.estimate[a] || a - b; }); }
    var wanted = String((document.getElementById("values-filter") || {}).value || "").toLowerCase();
    order.forEach(function (i, rank) {
      if (wanted && String(w.labels[i]).toLowerCase().indexOf(wanted) < 0) { return; }
      var tr = htmlEl("tr", {"data-index": String(i)});
      tr.appendChild(htmlEl("td", {"class": "num"}, String(rank + 1)));
      tr.appendChild(htmlEl("td", {"class": "label"}, String(w.labels[i])));
      tr.appendChild(htmlEl("td", {"class": "num estimate"}, fmt(w.estimate[i])));
      tr.appendChild(htmlEl("td", {"class": "num band"}, bandReadout(band(w, i))));
      tr.appendChild(htmlEl("td", {"class": "num unbiased"}, fmt(raw[i])));
      tr.appendChild(htmlEl("td", {"class": "num std-error"}, fmt(se[i])));
      if (foundBy) { tr.appendChild(htmlEl("td", {"class": "found-by"}, String(foundBy[w.value_indices ? w.value_indices[i] : i] || "\u2014"))); }
      if (w.smallest_resolvable && w.estimate[i] < w.smallest_resolvable) { tr.setAttribute("class", "unresolved"); }
      body.appendChild(tr);
    });
    table.appendChild(body);
    holder.appendChild(table);
    if (w.values_total) {
      holder.appendChild(htmlEl("p", {"class": "note", id: "values-cut"}, "the " + w.estimate.length + " largest of " + count(w.values_total) + " values: an export keeps these; serve the store to see all"));
    }
  }

  function drawWindowFacts(w) {
    var facts = document.getElementById("window-facts");
    clear(facts);
    var rejected = rejectTotal(w);
    var warning = document.getElementById("window-warning");
    warning.hidden = !fewHere(w);
    warning.textContent = fewHere(w) ? "\u26a0 too few reports in this window, unlike most of its series: its smallest resolvable frequency is above the threshold the advice at the top of the page states" : "";
    var integrity = document.getElementById("window-integrity");
    integrity.hidden = !w.integrity_flag;
    integrity.textContent = w.integrity_flag ? "\u2691 " + w.integrity_flag : "";
    var items = [["window", shortTime(w.window_start) + " \u2013 " + shortTime(w.window_end) + " UTC" + (w._partial ? " (partial)" : "")],
                 ["n", count(w.n)],
                 ["pane", TIMING[timingOf(w)].name + " #" + paneIndex(w) + ((w.pane && w.pane.is_last) ? ", last" : "")],
                 ["late reports", w.late_reports === null || w.late_reports === undefined ? "\u2014" : count(w.late_reports)],
                 ["rejected", count(rejected)],
                 ["smallest resolvable", w.smallest_resolvable ? fmt(w.smallest_resolvable) + " (2 s.e. at f = 0)" : "\u2014"]];
    if (w._partial) { items.push(["partial", partialText(w)]); }
    if (typeof w.mean === "number") { items.push(["mean", byError(w.mean, bandHalf(w.mean_band))]); }
    if (typeof w.mean === "number") { items.push(["mean, 95% band", w.mean_band ? bandText(w.mean_band) : "none"]); }
    if (typeof w.mean === "number" && !w.mean_band && w.conservative_mean_band) { items.push(["mean, conservative band", bandText(w.conservative_mean_band) + " conservative (not a 95% band)"]); }
    if (typeof w.variance === "number") { items.push(["variance", String(Number(w.variance.toPrecision(3)))]); }
    if (w.estimator && w.estimator.iterations !== null && w.estimator.iterations !== undefined) {
      items.push(["estimator", w.estimator.method + ", " + w.estimator.iterations + " iterations" +
                  (w.estimator.last_change !== null && w.estimator.last_change !== undefined ? ", last change " + Number(w.estimator.last_change).toExponential(2) : "")]);
    }
    var hh = w.heavy_hitters;  /* a string metric's window: how its heavy hitters were found */
    if (hh && w.estimate) {
      items.push(["heavy hitters", count(w.estimate.length) + " found (at most " + count(hh.top) + ", above " + fmt(hh.threshold) + ")" +
                  (hh.reason ? ": " + String(hh.reason) : "")]);
    }
    items.forEach(function (item) {
      var div = htmlEl("div", {"data-fact": item[0]});
      div.appendChild(htmlEl("dt", {}, item[0]));
      div.appendChild(htmlEl("dd", {}, item[1]));
      facts.appendChild(div);
    });
  }

  /* -- accounting: n (late part shaded) and rejects by reason, per window ------------------ */
  function drawAccounting() {
    var holder = document.getElementById("accounting");
    var tableHolder = document.getElementById("accounting-table");
    clear(holder); clear(tableHolder);
    if (!windows.length) { return; }
    var reasons = [];
    windows.forEach(function (w) { for (var r in (w.rejects || {})) { if (reasons.indexOf(r) < 0) { reasons.push(r); } } });
    reasons.sort();
    var width = chartWidth(holder), height = 260;
    var svg = svgEl("svg", {width: width, height: height, viewBox: "0 0 " + width + " " + height, role: "img", "aria-label": "reports per window"});
    var nBox = {left: 70, top: 14, width: width - 70 - 18, height: 130};
    var rBox = {left: 70, top: 168, width: width - 70 - 18, height: 56};
    var yN = frame(svg, nBox, 0, Math.max(1, Math.max.apply(null, windows.map(function (w) { return w.n; }))) * 1.1, "n", 4, true);
    var maxRejected = Math.max.apply(null, windows.map(rejectTotal));
    var yR = frame(svg, rBox, 0, Math.max(1, maxRejected) * 1.15, "rejected", 2, true);
    var step = nBox.width / windows.length;
    var barW = Math.max(2, Math.min(48, step * 0.6));
    windows.forEach(function (w, k) {
      var cx = nBox.left + (k + 0.5) * step;
      var late = Math.max(0, w.late_reports || 0);
      var onTime = w.n - late;
      var label = shortTime(w.window_start) + ": n = " + count(w.n) + (late ? " (" + count(late) + " late)" : "") + ", " + TIMING[timingOf(w)].name + " pane " + paneIndex(w);
      svg.appendChild(tooltip(svgEl("rect", {x: cx - barW / 2, y: yN(onTime), width: barW, height: Math.max(0, yN(0) - yN(onTime)), "class": "n-bar" + (key(w) === selectedKey ? " selected" : "")}), label));
      if (late) { svg.appendChild(tooltip(svgEl("rect", {x: cx - barW / 2, y: yN(w.n), width: barW, height: yN(onTime) - yN(w.n), "class": "late-bar"}), label)); }
      svg.appendChild(tooltip(svgEl("circle", {cx: cx, cy: yN(w.n) - 7, r: 3.5, fill: TIMING[timingOf(w)].color}), TIMING[timingOf(w)].name + " pane"));
      var base = 0;
      reasons.forEach(function (reason, r) {
        var c = (w.rejects || {})[reason] || 0;
        if (!c) { return; }
        svg.appendChild(tooltip(svgEl("rect", {x: cx - barW / 2, y: yR(base + c), width: barW, height: yR(base) - yR(base + c), fill: REASON_COLORS[r % REASON_COLORS.length]}), reason + ": " + count(c)));
        base += c;
      });
    });
    timeTicks(svg, nBox, windows.length, function (k) { return nBox.left + (k + 0.5) * step; }, height - 14);
    if (!maxRejected) { svg.appendChild(svgEl("text", {x: rBox.left + 8, y: rBox.top + rBox.height / 2, "class": "note-text"}, "no dead letters in these windows")); }
    holder.appendChild(svg);
    var legend = htmlEl("div", {"class": "legend"});
    [["n-swatch", "counted on time"], ["late-swatch", "counted late"]].concat(reasons.map(function (r, i) { return [i, "rejected: " + r]; })).forEach(function (item) {
      var span = htmlEl("span", {"class": "legend-item"});
      var swatch = htmlEl("span", {"class": "swatch " + (typeof item[0] === "string" ? item[0] : "")});
      if (typeof item[0] === "number") { swatch.style.background = REASON_COLORS[item[0] % REASON_COLORS.length]; }
      span.appendChild(swatch);
      span.appendChild(document.createTextNode(item[1]));
      legend.appendChild(span);
    });
    holder.appendChild(legend);

    var table = htmlEl("table", {"class": "grid", id: "accounting-rows"});
    var head = htmlEl("tr");
    [["window start", ""], ["pane", ""], ["n", "num"], ["late reports", "num"], ["rejected", ""], ["flags", ""]].forEach(function (t) { head.appendChild(htmlEl("th", t[1] ? {"class": t[1]} : {}, t[0])); });
    var thead = htmlEl("thead"); thead.appendChild(head); table.appendChild(thead);
    var body = htmlEl("tbody");
    windows.slice().reverse().forEach(function (w) {
      var tr = htmlEl("tr", {"data-window": w.window_start});
      tr.appendChild(htmlEl("td", {}, shortTime(w.window_start)));
      var pane = htmlEl("td", {}, TIMING[timingOf(w)].name + " #" + paneIndex(w));
      pane.className = "pane-" + timingOf(w).toLowerCase();
      tr.appendChild(pane);
      tr.appendChild(htmlEl("td", {"class": "num n"}, count(w.n)));
      tr.appendChild(htmlEl("td", {"class": "num late"}, w.late_reports === null || w.late_reports === undefined ? "\u2014" : count(w.late_reports)));
      var parts = Object.keys(w.rejects || {}).sort().map(function (r) { return r + " " + count(w.rejects[r]); });
      tr.appendChild(htmlEl("td", {"class": "rejects"}, parts.length ? parts.join(", ") : "0"));
      tr.appendChild(htmlEl("td", {"class": "flags"}, [w._partial ? "partial" : "", fewHere(w) ? "too few reports" : "", w.integrity_flag ? "integrity: " + ((w.integrity && w.integrity.implicated.join(" ")) || "flagged") : ""].filter(Boolean).join(", ")));
      tr.addEventListener("click", function () { select(key(w), true); });
      body.appendChild(tr);
    });
    table.appendChild(body);
    tableHolder.appendChild(table);
  }

  /* -- selection, series, merging new panes, polling --------------------------------------- */
  function fillSelect() {
    var selectNode = document.getElementById("window-select");
    clear(selectNode);
    windows.forEach(function (w) {
      var flags = [TIMING[timingOf(w)].name];
      if (w._partial) { flags.push("partial"); }
      if (fewHere(w)) { flags.push("too few reports"); }
      if (w.integrity_flag) { flags.push("integrity flagged"); }
      var option = htmlEl("option", {value: key(w)}, shortTime(w.window_start) + " \u2013 " + shortTime(w.window_end) + "  (n = " + count(w.n) + ", " + flags.join(", ") + ")");
      if (key(w) === selectedKey) { option.selected = true; }
      selectNode.appendChild(option);
    });
    var slider = document.getElementById("window-slider");
    if (slider) {
      slider.max = String(Math.max(0, windows.length - 1));
      var at = windows.findIndex(function (w) { return key(w) === selectedKey; });
      slider.value = String(Math.max(0, at));
      slider.hidden = windows.length < 2;
    }
    var names = seriesNames(), seriesNode = document.getElementById("series-select");
    document.getElementById("series-card").hidden = names.length < 2;
    clear(seriesNode);
    names.forEach(function (name) {
      var n = allWindows.filter(function (w) { return w.series === name; }).length;
      var option = htmlEl("option", {value: name}, name + " windows (" + n + ")");
      if (name === series) { option.selected = true; }
      seriesNode.appendChild(option);
    });
  }

  function select(windowKey, byUser) {
    selectedKey = windowKey;
    if (byUser) { userSelected = true; }
    render();
  }

  /* The windows of the shown series, partial ones flagged. */
  function chooseSeries() {
    var names = seriesNames();
    if (names.indexOf(series) < 0) { series = names[0] || null; }
    windows = allWindows.filter(function (w) { return w.series === series; });
    flagPartial();
  }

  /* A light window (only what the charts over windows draw) is fetched whole when chosen. */
  function ensureFull(w) {
    if (!w.light || fetching[key(w)]) { return; }
    if (!state.live) { loadWindowFile(w); return; }
    fetching[key(w)] = true;
    fetch("api/window?metric=" + encodeURIComponent(state.metric) + "&start=" + encodeURIComponent(w.window_start) + "&end=" + encodeURIComponent(w.window_end) + "&version=" + encodeURIComponent(w.version || ""), {cache: "no-store"})
      .then(function (response) { return response.ok ? response.json() : Promise.reject(new Error("HTTP " + response.status)); })
      .then(function (full) { merge([full]); render(); })
      .catch(function () { /* shown as not loaded; the next choice retries */ })
      .then(function () { delete fetching[key(w)]; });
  }

  /* An exported page loads the data file holding a window as a script (a page opened from disk
   * may not fetch): the file calls ldpWindows(views) with its run of windows. */
  function loadWindowFile(w) {
    var files = state.window_files && state.window_files.files;
    if (!files || !files.length || fetching[key(w)]) { return; }
    var chosen = files[0];
    files.forEach(function (file) { if (file[0] <= w.start_ms) { chosen = file; } });
    if (fetching["file:" + chosen[1]]) { return; }
    fetching["file:" + chosen[1]] = true;
    var script = document.createElement("script");
    script.src = state.window_files.prefix + chosen[1];
    script.onerror = function () { delete fetching["file:" + chosen[1]]; };
    document.body.appendChild(script);
  }
  window.ldpWindows = function (views) { merge(views); render(); };

  /* -- the windows held: the latest page, or a page of earlier ones ------------------------
   * A page holds at most a server's page of windows (MAX_WINDOWS_PER_PAGE of
   * dashboard/source.py); state.span says how many the metric has. The range bar pages by time
   * through api/windows: the page before the first held window, the one after the last, or the
   * latest again. A page of history is in the URL (page, page_end: its first and last window's
   * start). */
  var loaded = {latest: true};
  function heldText(first, last, span) {
    return "windows " + shortTime(first.window_start) + " \u2013 " + shortTime(last.window_end) + " UTC: " +
      count(allWindows.length) + " of " + count(span.windows);
  }
  function drawRangeBar() {
    var bar = document.getElementById("range-bar"), span = state.span || {};
    if (!bar) { return; }
    var whole = !allWindows.length || !span.windows || (loaded.latest && span.windows <= allWindows.length);
    bar.hidden = whole;
    if (whole) { return; }
    var first = allWindows[0], last = allWindows[allWindows.length - 1];
    document.getElementById("range-text").textContent = heldText(first, last, span) +
      (state.live ? "" : " (an export holds the latest windows; serve the store to see the others)");
    ["range-earlier", "range-later", "range-latest"].forEach(function (id) { document.getElementById(id).hidden = !state.live; });
    document.getElementById("range-earlier").disabled = first.start_ms <= span.first_start_ms;
    document.getElementById("range-later").disabled = loaded.latest;
    document.getElementById("range-latest").disabled = loaded.latest;
  }
  /* Replace the windows held with a page of api/windows (`query`: its time range and order);
   * `pick`: the key of the window to choose, "first" or "last" of the page, or null (the latest
   * complete one). */
  function loadPage(query, pick) {
    var status = document.getElementById("status");
    return fetch("api/windows?metric=" + encodeURIComponent(state.metric) + "&since=0" + query, {cache: "no-store"})
      .then(function (response) { return response.ok ? response.json() : Promise.reject(new Error("HTTP " + response.status)); })
      .then(function (data) {
        if (!data.count) { return; }
        state.series = data.series; state.span = data.span;
        allWindows = []; merge(expand(data)); dataVersion++;
        var last = allWindows[allWindows.length - 1];
        loaded.latest = !data.span || last.start_ms >= data.span.last_start_ms;
        zoom = null; state.fromHash = false;
        var names = seriesNames();
        if (names.indexOf(series) < 0) { series = names[0] || null; }
        var held = allWindows.filter(function (w) { return w.series === series; });
        var chosen = pick === "first" ? held[0] : pick === "last" ? held[held.length - 1] :
          held.find(function (w) { return key(w) === pick; });
        selectedKey = chosen ? key(chosen) : null; userSelected = !!chosen;
        render();
      })
      .catch(function () { if (status) { status.textContent = "live \u00b7 could not load those windows, retry"; } });
  }
  function loadEarlier() {
    if (!allWindows.length) { return null; }
    return loadPage("&to=" + encodeURIComponent(isoOf(allWindows[0].start_ms)), "last");
  }
  function loadLater() {
    if (!allWindows.length) { return null; }
    return loadPage("&from=" + encodeURIComponent(isoOf(allWindows[allWindows.length - 1].start_ms + 1)) + "&order=oldest", "first");
  }

  function render() {
    chooseSeries();
    var current = windows.find(function (w) { return key(w) === selectedKey; });
    if (!current && windows.length) {  /* the latest window that is not partial */
      var complete = windows.filter(function (w) { return !w._partial; });
      current = (complete.length ? complete : windows)[(complete.length ? complete : windows).length - 1];
      selectedKey = key(current);
    }
    if (!userSelected && windows.length && current && !state.fromHash) {
      var whole = windows.filter(function (w) { return !w._partial; });
      current = (whole.length ? whole : windows)[(whole.length ? whole : windows).length - 1];
      selectedKey = key(current);
    }
    fillSelect();
    drawRangeBar();
    var chartStarted = window.performance ? performance.now() : 0;
    drawTopK();
    if (!state.renders && window.performance) { document.body.setAttribute("data-topk-ms", (performance.now() - chartStarted).toFixed(1)); }
    if (current && current.light) {
      ensureFull(current);
      clear(document.getElementById("distribution")); clear(document.getElementById("values")); clear(document.getElementById("quantiles"));
      document.getElementById("distribution").appendChild(htmlEl("p", {"class": "empty"}, state.live || state.window_files ? "loading this window\u2026" : "this window is not in the page"));
      drawWindowFacts(current);
    } else if (current) { drawWindowFacts(current); drawDistribution(current); drawValues(current); }
    drawAccounting();
    writeHash();
    document.body.setAttribute("data-windows", String(windows.length));
    document.body.setAttribute("data-cursor", String(state.cursor));
    document.body.setAttribute("data-rendered", String((state.renders = (state.renders || 0) + 1)));
    if (state.renders === 1 && window.performance) { document.body.setAttribute("data-drawn-ms", String(Math.round(performance.now()))); }
  }

  function merge(changed) {
    var byKey = {};
    allWindows.forEach(function (w) { byKey[fullKey(w)] = w; });
    changed.forEach(function (w) {
      var old = byKey[fullKey(w)];
      if (!old || paneIndex(old) < paneIndex(w) || (paneIndex(old) === paneIndex(w) && (old.light || !w.light))) {
        if (!old || paneIndex(old) !== paneIndex(w)) { dataVersion++; }  /* else: same values, now whole */
        if (old) { ["start_ms", "end_ms", "few", "partial"].forEach(function (f) { if (w[f] === undefined) { w[f] = old[f]; } }); }
        if (!w.top && old && old.top && w.value_indices) { w.top = old.top; }  /* an export's cut view */
        if (!w.top && old && old.top && old.top.indices && w.estimate) {  /* keep the series' top-k indices */
          w.top = {indices: old.top.indices, labels: old.top.labels,
                   estimate: old.top.indices.map(function (i) { return w.estimate[i]; }),
                   lower95: old.top.indices.map(function (i) { return (w.lower95 || [])[i]; }),
                   upper95: old.top.indices.map(function (i) { return (w.upper95 || [])[i]; })};
        }
        byKey[fullKey(w)] = w;
      }
    });
    allWindows = Object.keys(byKey).map(function (k) { return byKey[k]; }).sort(function (a, b) {
      return a.window_start < b.window_start ? -1 : a.window_start > b.window_start ? 1 : (a.window_end < b.window_end ? -1 : a.window_end > b.window_end ? 1 : 0);
    });
  }

  /* What the rows of each series are keyed by: its top-k value indices, or its strings. */
  function topKeys(list) {
    return JSON.stringify((list || []).map(function (s) { return [s.name, s.by_label ? s.labels : s.indices]; }));
  }
  /* The windows held, asked again (their rows with the series' new top-k), merged in place:
   * the zoom and the chosen window stay. A live page may hold more windows than a server's
   * page (its page and those that arrived since): they are asked for page by page, the latest
   * first, down to the first one held. */
  function refreshHeld() {
    if (!allWindows.length) { render(); return; }
    var first = allWindows[0].start_ms, keys = topKeys(state.series);
    function page(to) {
      return fetch("api/windows?metric=" + encodeURIComponent(state.metric) + "&since=0&from=" + encodeURIComponent(isoOf(first)) +
                   "&to=" + encodeURIComponent(isoOf(to)), {cache: "no-store"})
        .then(function (response) { return response.ok ? response.json() : Promise.reject(new Error("HTTP " + response.status)); })
        .then(function (data) {
          if (!data.count || topKeys(data.series) !== keys) { return null; }
          var rows = expand(data);
          merge(rows); dataVersion++;
          var earliest = Math.min.apply(null, rows.map(function (w) { return w.start_ms; }));
          /* the next page ends after the earliest start this one held (its other windows of
           * that start, if the page was cut among them), always before this page's end */
          return earliest > first ? page(earliest + 1 < to ? earliest + 1 : earliest) : null;
        });
    }
    page(allWindows[allWindows.length - 1].start_ms + 1).catch(function () { return null; }).then(render);
  }
  function poll() {
    var status = document.getElementById("status");
    fetch("api/windows?metric=" + encodeURIComponent(state.metric) + "&since=" + state.cursor, {cache: "no-store"})
      .then(function (response) { return response.ok ? response.json() : Promise.reject(new Error("HTTP " + response.status)); })
      .then(function (update) {
        var changed = update.count ? expand(update) : [];
        if (!loaded.latest && allWindows.length) {  /* a page of history: only its own windows */
          var low = allWindows[0].start_ms, high = allWindows[allWindows.length - 1].start_ms;
          changed = changed.filter(function (w) { return w.start_ms >= low && w.start_ms <= high; });
        }
        if (update.span) { state.span = update.span; }
        if (changed.length) {
          var before = topKeys(state.series);
          state.series = update.series; merge(changed); state.cursor = update.cursor;
          /* a series' top-k changed: the rows held carry the old one's values */
          if (topKeys(update.series) !== before) { refreshHeld(); } else { render(); }
        }
        else { state.cursor = update.cursor; }
        status.textContent = "live \u00b7 updated " + new Date().toLocaleTimeString("en-GB") + " \u00b7 " + allWindows.length + (allWindows.length === 1 ? " window" : " windows");
      })
      .catch(function () { status.textContent = "live \u00b7 server unreachable, retrying"; })
      .then(function () { setTimeout(poll, state.poll_ms); });
  }

  document.getElementById("window-select").addEventListener("change", function (event) { select(event.target.value, true); });
  /* navigation by time: the slider, the buttons, and the arrow keys (outside a text field) */
  function step(by) {
    var at = windows.findIndex(function (w) { return key(w) === selectedKey; });
    var next = windows[Math.max(0, Math.min(windows.length - 1, at + by))];
    if (next && key(next) !== selectedKey) { select(key(next), true); }
  }
  var sliderNode = document.getElementById("window-slider");
  if (sliderNode) {
    sliderNode.addEventListener("input", function () { var w = windows[Number(sliderNode.value)]; if (w) { select(key(w), true); } });
  }
  var prevNode = document.getElementById("window-prev"), nextNode = document.getElementById("window-next");
  if (prevNode) { prevNode.addEventListener("click", function () { step(-1); }); }
  if (nextNode) { nextNode.addEventListener("click", function () { step(1); }); }
  document.addEventListener("keydown", function (event) {
    var target = event.target || {}, tag = String(target.tagName || "").toLowerCase();
    if (tag === "input" || tag === "select" || tag === "textarea" || event.altKey || event.ctrlKey || event.metaKey) { return; }
    if (event.key === "ArrowLeft") { step(-1); event.preventDefault(); }
    else if (event.key === "ArrowRight") { step(1); event.preventDefault(); }
  });
  var filterNode = document.getElementById("values-filter");
  if (filterNode) {
    filterNode.addEventListener("input", function () {
      var current = windows.find(function (w) { return key(w) === selectedKey; });
      if (current && !current.light) { drawValues(current); }
    });
  }
  document.getElementById("series-select").addEventListener("change", function (event) { series = event.target.value; selectedKey = null; userSelected = false; state.fromHash = false; hidden = Object.create(null); render(); });
  var orderNode = document.getElementById("order-select");
  merge(expand(state));
  var firstFull = allWindows.find(function (w) { return w.labels && w.labels.length; });
  order = firstFull ? (isOrdinal(firstFull) ? "label" : "ranked") : null;
  if (orderNode) {
    if (order) { orderNode.value = order; }
    orderNode.addEventListener("change", function (event) { order = event.target.value; render(); });
    document.getElementById("show-all").addEventListener("click", function () { showAll = !showAll; render(); });
  }
  var fromHash = readHash();
  if (fromHash.series) { series = fromHash.series; }
  if (fromHash.from && fromHash.to && Date.parse(fromHash.from) < Date.parse(fromHash.to)) {
    zoom = {min: Date.parse(fromHash.from) / 1000, max: Date.parse(fromHash.to) / 1000};
  }
  if (fromHash.window && allWindows.some(function (w) { return key(w) === fromHash.window; })) {
    selectedKey = fromHash.window; userSelected = true; state.fromHash = true;
  }
  [["range-earlier", loadEarlier], ["range-later", loadLater],
   ["range-latest", function () { return loadPage("", null); }]].forEach(function (pair) {
    var node = document.getElementById(pair[0]);
    if (node) { node.addEventListener("click", pair[1]); }
  });
  render();
  if (state.live && fromHash.page && !isNaN(Date.parse(fromHash.page)) && allWindows.length &&
      Date.parse(fromHash.page) < allWindows[0].start_ms) {  /* a page of history, from the URL */
    var pageEnd = Date.parse(fromHash.page_end || "");
    loadPage("&from=" + encodeURIComponent(fromHash.page) + (isNaN(pageEnd) ? "" : "&to=" + encodeURIComponent(isoOf(pageEnd + 1))) +
             "&order=oldest", fromHash.window || "last").then(function () {
      if (fromHash.from && fromHash.to && Date.parse(fromHash.from) < Date.parse(fromHash.to)) {
        zoom = {min: Date.parse(fromHash.from) / 1000, max: Date.parse(fromHash.to) / 1000}; chartDrawn = null; render();
      }
    });
  }
  var resizeTimer = null;
  window.addEventListener("resize", function () { clearTimeout(resizeTimer); resizeTimer = setTimeout(render, 150); });
  if (state.live) { setTimeout(poll, state.poll_ms); }
})();
