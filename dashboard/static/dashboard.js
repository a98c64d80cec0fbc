/* ldp-telemetry dashboard: draws one metric's windows as inline SVG and, on a live page, polls
 * api/windows with a cursor for the panes that arrived since. No library, no request to any
 * other host; every value from the data is set with textContent or an attribute, never parsed
 * as markup. It computes no statistic: each window carries its 95% bands (lower95, upper95,
 * half95 per value) and smallest_resolvable, computed by the server (dashboard/source.py). */
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

  function key(w) { return w.window_start + "|" + w.window_end; }
  function timingOf(w) { return (w.pane && w.pane.timing) || "ON_TIME"; }
  function paneIndex(w) { return (w.pane && w.pane.index) || 0; }
  function fmt(x, digits) { return (x === null || x === undefined) ? "\u2014" : Number(x).toFixed(digits === undefined ? 4 : digits); }
  function count(x) { return (x === null || x === undefined) ? "\u2014" : Number(x).toLocaleString("en-US"); }
  function shortTime(iso) {
    return String(iso).replace("T", " ").replace(/:00(\.000)?Z$/, "").replace(/ 00:00$/, "").replace(/Z$/, "");
  }
  function rejectTotal(w) { var t = 0; for (var r in (w.rejects || {})) { t += w.rejects[r]; } return t; }
  /* The 95% band of value i of a window: {low, high, half}; the estimate itself without one. */
  function band(w, i) {
    var e = w.estimate[i] || 0, low = (w.lower95 || [])[i], high = (w.upper95 || [])[i];
    if (typeof low !== "number" || typeof high !== "number") { return {low: e, high: e, half: 0}; }
    return {low: low, high: high, half: (w.half95 || [])[i] || 0};
  }

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

  /* -- top-k values over windows, with 95% bands and pane markers ------------------------- */
  function topLabels() {
    var totals = {};
    windows.forEach(function (w) {
      (w.labels || []).forEach(function (label, i) { totals[i] = (totals[i] || 0) + (w.estimate[i] || 0); });
    });
    var order = Object.keys(totals).map(Number).sort(function (a, b) { return totals[b] - totals[a] || a - b; });
    return order.slice(0, state.top_k);
  }

  function drawTopK() {
    var holder = document.getElementById("topk");
    var legend = document.getElementById("topk-legend");
    clear(holder); clear(legend);
    if (!windows.length) { holder.appendChild(htmlEl("p", {"class": "empty"}, "No windows yet.")); return; }
    var width = chartWidth(holder), height = 300;
    var box = {left: 58, top: 14, width: width - 58 - 18, height: height - 14 - 56};
    var svg = svgEl("svg", {width: width, height: height, viewBox: "0 0 " + width + " " + height, role: "img", "aria-label": "top values over windows"});
    var chosen = topLabels();
    var high = 0.05;
    windows.forEach(function (w) {
      chosen.forEach(function (i) { high = Math.max(high, band(w, i).high); });
    });
    var y = frame(svg, box, 0, high * 1.08, "frequency");
    var step = box.width / windows.length;
    var x = function (k) { return box.left + (k + 0.5) * step; };
    var selectedAt = windows.findIndex(function (w) { return key(w) === selectedKey; });
    if (selectedAt >= 0) {
      svg.appendChild(svgEl("rect", {x: box.left + selectedAt * step, y: box.top, width: step, height: box.height, "class": "selected-window"}));
    }
    chosen.forEach(function (i, rank) {
      var color = PALETTE[rank % PALETTE.length];
      var upper = [], lower = [], line = [];
      windows.forEach(function (w, k) {
        var e = w.estimate[i] || 0, b = band(w, i);
        upper.push(x(k) + "," + y(b.high));
        lower.unshift(x(k) + "," + y(Math.max(0, b.low)));
        line.push(x(k) + "," + y(e));
      });
      svg.appendChild(svgEl("polygon", {points: upper.concat(lower).join(" "), fill: color, "fill-opacity": 0.13, stroke: "none"}));
      svg.appendChild(svgEl("polyline", {points: line.join(" "), fill: "none", stroke: color, "stroke-width": 2}));
      windows.forEach(function (w, k) {
        var e = w.estimate[i] || 0, b = band(w, i), timing = timingOf(w);
        svg.appendChild(svgEl("line", {x1: x(k), x2: x(k), y1: y(b.high), y2: y(Math.max(0, b.low)), stroke: color, "stroke-opacity": 0.45}));
        var text = w.labels[i] + " \u00b7 " + shortTime(w.window_start) + ": " + fmt(e) + " \u00b1 " + fmt(b.half) + " (" + TIMING[timing].name + " pane " + paneIndex(w) + ")";
        var marker;
        if (timing === "LATE") {
          marker = svgEl("rect", {x: x(k) - 4.5, y: y(e) - 4.5, width: 9, height: 9, transform: "rotate(45 " + x(k) + " " + y(e) + ")", fill: color, stroke: TIMING.LATE.color, "stroke-width": 2});
        } else if (timing === "EARLY") {
          marker = svgEl("circle", {cx: x(k), cy: y(e), r: 4.5, fill: "#fff", stroke: color, "stroke-width": 2, "stroke-dasharray": "2 1.5"});
        } else {
          marker = svgEl("circle", {cx: x(k), cy: y(e), r: 4, fill: color});
        }
        svg.appendChild(tooltip(marker, text));
      });
      var item = htmlEl("span", {"class": "legend-item"});
      var swatch = htmlEl("span", {"class": "swatch"});
      swatch.style.background = color;
      item.appendChild(swatch);
      item.appendChild(document.createTextNode(windows[0].labels[i]));
      legend.appendChild(item);
    });
    var every = Math.max(1, Math.ceil(windows.length / Math.max(1, Math.floor(box.width / 110))));
    windows.forEach(function (w, k) {
      if (k % every === 0) {
        svg.appendChild(svgEl("text", {x: x(k), y: box.top + box.height + 18, "class": "tick", "text-anchor": "middle"}, shortTime(w.window_start)));
      }
      var hit = svgEl("rect", {x: box.left + k * step, y: box.top, width: step, height: box.height, "class": "hit"});
      hit.addEventListener("click", function () { select(key(w), true); });
      svg.appendChild(tooltip(hit, "window " + shortTime(w.window_start) + " \u2013 " + shortTime(w.window_end) + ", n = " + count(w.n) + ", " + TIMING[timingOf(w)].name + " pane " + paneIndex(w)));
    });
    svg.appendChild(svgEl("text", {x: box.left + box.width, y: height - 8, "class": "axis-label", "text-anchor": "end"}, "window start (UTC)"));
    holder.appendChild(svg);
    [["ON_TIME", "on-time pane"], ["EARLY", "early pane"], ["LATE", "late pane"]].forEach(function (p) {
      var item = htmlEl("span", {"class": "legend-item pane-" + p[0].toLowerCase()});
      item.appendChild(htmlEl("span", {"class": "marker"}));
      item.appendChild(document.createTextNode(p[1]));
      legend.appendChild(item);
    });
  }

  /* -- the selected window: distribution (or density) with error bars, and its values ----- */
  /* A numeric window's quantiles (a map level -> value) as [level, value] pairs; a quantile of
   * a window without reports is null and not drawn. */
  function quantilePairs(w) {
    return Object.keys(w.quantiles || {}).map(function (level) { return [Number(level), w.quantiles[level]]; })
      .filter(function (pair) { return typeof pair[1] === "number"; });
  }

  function drawDistribution(w) {
    var holder = document.getElementById("distribution");
    clear(holder);
    var d = w.estimate.length;
    var edges = w.bucket_edges || null;  /* a numeric metric's d + 1 bucket edges */
    var bars = [];
    for (var i = 0; i < d; i++) {
      var width = edges ? (edges[i + 1] - edges[i]) || 1 : 1, b = band(w, i);
      bars.push({v: w.estimate[i] / width, low: Math.max(0, b.low / width), high: b.high / width, half: b.half / width});
    }
    var low = Math.min(0, Math.min.apply(null, bars.map(function (b) { return b.low; })));
    var high = Math.max(1e-9, Math.max.apply(null, bars.map(function (b) { return b.high; })));
    var floorLine = (!edges && w.smallest_resolvable) ? w.smallest_resolvable : null;
    if (floorLine) { high = Math.max(high, floorLine); }
    var perBar = edges ? 0 : 14;
    var widthPx = chartWidth(holder, 70 + d * perBar);
    var labelRoom = edges ? 40 : 14 + 5.6 * Math.min(14, Math.max.apply(null, w.labels.map(function (l) { return String(l).length; })));
    var height = 290 + labelRoom;
    var box = {left: 58, top: 16, width: widthPx - 58 - 18, height: height - 16 - labelRoom - 22};
    var svg = svgEl("svg", {width: widthPx, height: height, viewBox: "0 0 " + widthPx + " " + height, role: "img", "aria-label": "distribution of the selected window"});
    var y = frame(svg, box, low, high * 1.08, edges ? "density" : "frequency");
    var x, barWidth;
    if (edges) {
      var x0 = edges[0], x1 = edges[d];
      x = function (value) { return box.left + box.width * (value - x0) / ((x1 - x0) || 1); };
      niceTicks(x0, x1, 8).forEach(function (t) {
        svg.appendChild(svgEl("text", {x: x(t), y: box.top + box.height + 16, "class": "tick", "text-anchor": "middle"}, String(Number(t.toPrecision(4)))));
      });
    } else {
      barWidth = box.width / d;
    }
    bars.forEach(function (b, i) {
      var left = edges ? x(edges[i]) : box.left + i * barWidth;
      var right = edges ? x(edges[i + 1]) : box.left + (i + 1) * barWidth;
      var pad = Math.min(2, (right - left) * 0.15);
      var top = y(Math.max(0, b.v)), bottom = y(Math.min(0, b.v));
      var label = edges ? "[" + edges[i] + ", " + edges[i + 1] + ")" : w.labels[i];
      var bar = svgEl("rect", {x: left + pad, y: top, width: Math.max(1, right - left - 2 * pad), height: Math.max(0.5, bottom - top), "class": "bar"});
      svg.appendChild(tooltip(bar, label + ": " + fmt(w.estimate[i]) + " \u00b1 " + fmt(band(w, i).half) + " (95%)"));
      var mid = (left + right) / 2;
      if (b.half > 0) {
        svg.appendChild(svgEl("line", {x1: mid, x2: mid, y1: y(b.high), y2: y(b.low), "class": "errorbar"}));
        var cap = Math.min(4, (right - left) / 3);
        svg.appendChild(svgEl("line", {x1: mid - cap, x2: mid + cap, y1: y(b.high), y2: y(b.high), "class": "errorbar"}));
        svg.appendChild(svgEl("line", {x1: mid - cap, x2: mid + cap, y1: y(b.low), y2: y(b.low), "class": "errorbar"}));
      }
      if (!edges) {
        var ty = box.top + box.height + 10;
        var name = String(w.labels[i]);
        svg.appendChild(svgEl("text", {x: mid, y: ty, "class": "tick category", "text-anchor": "end", transform: "rotate(-60 " + mid + " " + ty + ")"}, name.length > 14 ? name.slice(0, 13) + "\u2026" : name));
      }
    });
    if (floorLine) {
      svg.appendChild(svgEl("line", {x1: box.left, x2: box.left + box.width, y1: y(floorLine), y2: y(floorLine), "class": "floor"}));
      svg.appendChild(svgEl("text", {x: box.left + box.width - 4, y: y(floorLine) - 5, "class": "floor-label", "text-anchor": "end"}, "smallest resolvable: " + fmt(floorLine)));
    }
    if (edges) {
      quantilePairs(w).forEach(function (pair) {
        var qx = x(pair[1]);
        svg.appendChild(svgEl("line", {x1: qx, x2: qx, y1: box.top, y2: box.top + box.height, "class": "quantile"}));
        svg.appendChild(svgEl("text", {x: qx + 3, y: box.top + 12, "class": "quantile-label"}, "q" + Number((pair[0] * 100).toPrecision(3)) + " = " + Number(pair[1].toPrecision(4))));
      });
      if (typeof w.mean === "number") {
        svg.appendChild(svgEl("line", {x1: x(w.mean), x2: x(w.mean), y1: box.top, y2: box.top + box.height, "class": "mean"}));
        svg.appendChild(svgEl("text", {x: x(w.mean) + 3, y: box.top + 26, "class": "mean-label"}, "mean = " + Number(w.mean.toPrecision(4))));
      }
    }
    holder.appendChild(svg);
  }

  function drawValues(w) {
    var holder = document.getElementById("values");
    clear(holder);
    var table = htmlEl("table", {"class": "grid", id: "values-table"});
    var head = htmlEl("thead"), row = htmlEl("tr");
    ["#", "value", "estimate", "\u00b1 95%", "unbiased", "std. error"].forEach(function (t) { row.appendChild(htmlEl("th", {}, t)); });
    head.appendChild(row);
    table.appendChild(head);
    var body = htmlEl("tbody");
    var se = w.std_error || [], half = w.half95 || [], raw = w.unbiased_estimate || [];
    var order = w.estimate.map(function (_, i) { return i; }).sort(function (a, b) { return w.estimate[b] - w.estimate[a] || a - b; });
    order.forEach(function (i, rank) {
      var tr = htmlEl("tr", {"data-index": String(i)});
      tr.appendChild(htmlEl("td", {"class": "num"}, String(rank + 1)));
      tr.appendChild(htmlEl("td", {"class": "label"}, String(w.labels[i])));
      tr.appendChild(htmlEl("td", {"class": "num estimate"}, fmt(w.estimate[i])));
      tr.appendChild(htmlEl("td", {"class": "num band"}, fmt(half[i])));
      tr.appendChild(htmlEl("td", {"class": "num unbiased"}, fmt(raw[i])));
      tr.appendChild(htmlEl("td", {"class": "num std-error"}, fmt(se[i])));
      if (w.smallest_resolvable && w.estimate[i] < w.smallest_resolvable) { tr.setAttribute("class", "unresolved"); }
      body.appendChild(tr);
    });
    table.appendChild(body);
    holder.appendChild(table);
  }

  function drawWindowFacts(w) {
    var facts = document.getElementById("window-facts");
    clear(facts);
    var rejected = rejectTotal(w);
    var items = [["window", shortTime(w.window_start) + " \u2013 " + shortTime(w.window_end) + " UTC"],
                 ["n", count(w.n)],
                 ["pane", TIMING[timingOf(w)].name + " #" + paneIndex(w) + ((w.pane && w.pane.is_last) ? ", last" : "")],
                 ["late reports", w.late_reports === null || w.late_reports === undefined ? "\u2014" : count(w.late_reports)],
                 ["rejected", count(rejected)],
                 ["smallest resolvable", w.smallest_resolvable ? fmt(w.smallest_resolvable) + " (2 s.e. at f = 0)" : "\u2014"]];
    if (typeof w.mean === "number") { items.push(["mean", fmt(w.mean)]); }
    if (typeof w.variance === "number") { items.push(["variance", fmt(w.variance)]); }
    if (w.estimator && w.estimator.iterations !== null && w.estimator.iterations !== undefined) {
      items.push(["estimator", w.estimator.method + ", " + w.estimator.iterations + " iterations" +
                  (w.estimator.last_change !== null && w.estimator.last_change !== undefined ? ", last change " + Number(w.estimator.last_change).toExponential(2) : "")]);
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
    var every = Math.max(1, Math.ceil(windows.length / Math.max(1, Math.floor(nBox.width / 110))));
    windows.forEach(function (w, k) {
      if (k % every === 0) { svg.appendChild(svgEl("text", {x: nBox.left + (k + 0.5) * step, y: height - 14, "class": "tick", "text-anchor": "middle"}, shortTime(w.window_start))); }
    });
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
    ["window start", "pane", "n", "late reports", "rejected"].forEach(function (t) { head.appendChild(htmlEl("th", {}, t)); });
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
      tr.addEventListener("click", function () { select(key(w), true); });
      body.appendChild(tr);
    });
    table.appendChild(body);
    tableHolder.appendChild(table);
  }

  /* -- selection, merging new panes, polling ----------------------------------------------- */
  function fillSelect() {
    var selectNode = document.getElementById("window-select");
    clear(selectNode);
    windows.forEach(function (w) {
      var option = htmlEl("option", {value: key(w)}, shortTime(w.window_start) + " \u2013 " + shortTime(w.window_end) + "  (n = " + count(w.n) + ", " + TIMING[timingOf(w)].name + ")");
      if (key(w) === selectedKey) { option.selected = true; }
      selectNode.appendChild(option);
    });
  }

  function select(windowKey, byUser) {
    selectedKey = windowKey;
    if (byUser) { userSelected = true; }
    render();
  }

  function render() {
    if (!userSelected && windows.length) { selectedKey = key(windows[windows.length - 1]); }
    var current = windows.find(function (w) { return key(w) === selectedKey; });
    fillSelect();
    drawTopK();
    if (current) { drawWindowFacts(current); drawDistribution(current); drawValues(current); }
    drawAccounting();
    document.body.setAttribute("data-windows", String(windows.length));
    document.body.setAttribute("data-cursor", String(state.cursor));
  }

  function merge(changed) {
    var byKey = {};
    windows.forEach(function (w) { byKey[key(w)] = w; });
    changed.forEach(function (w) {
      var old = byKey[key(w)];
      if (!old || paneIndex(old) <= paneIndex(w)) { byKey[key(w)] = w; }
    });
    windows = Object.keys(byKey).map(function (k) { return byKey[k]; }).sort(function (a, b) {
      return a.window_start < b.window_start ? -1 : a.window_start > b.window_start ? 1 : (a.window_end < b.window_end ? -1 : a.window_end > b.window_end ? 1 : 0);
    });
  }

  function poll() {
    var status = document.getElementById("status");
    fetch("api/windows?metric=" + encodeURIComponent(state.metric) + "&since=" + state.cursor, {cache: "no-store"})
      .then(function (response) { return response.ok ? response.json() : Promise.reject(new Error("HTTP " + response.status)); })
      .then(function (update) {
        if (update.windows.length) { merge(update.windows); state.cursor = update.cursor; render(); }
        else { state.cursor = update.cursor; }
        status.textContent = "live \u00b7 updated " + new Date().toLocaleTimeString("en-GB") + " \u00b7 " + windows.length + (windows.length === 1 ? " window" : " windows");
      })
      .catch(function () { status.textContent = "live \u00b7 server unreachable, retrying"; })
      .then(function () { setTimeout(poll, state.poll_ms); });
  }

  document.getElementById("window-select").addEventListener("change", function (event) { select(event.target.value, true); });
  merge(state.windows || []);
  render();
  var resizeTimer = null;
  window.addEventListener("resize", function () { clearTimeout(resizeTimer); resizeTimer = setTimeout(render, 150); });
  if (state.live) { setTimeout(poll, state.poll_ms); }
})();
