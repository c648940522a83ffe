/* Stellar page script: one uPlot chart per metric across the runs of a snapshot.
 * Reads the snapshot from the JSON script element #stellar-snapshot; never
 * injects markup built from data (text goes through textContent only). */
(function () {
  "use strict";

  var root = document.getElementById("stellar-root");
  var snapshot = JSON.parse(document.getElementById("stellar-snapshot").textContent);
  var state = { filter: "", unchecked: new Set(), smoothing: 0, log: false };
  var charts = [];
  var api = { snapshot: snapshot, charts: charts, firstChartAt: null, ready: false, errors: [] };
  window.stellar = api;

  var servedOverHttp = /^https?:$/.test(window.location.protocol);
  var seriesPath = root.getAttribute("data-series-path") || "";

  function fmt(v) {
    if (v === null || v === undefined || !isFinite(v)) return "–";
    var a = Math.abs(v);
    if (a !== 0 && (a >= 1e6 || a < 1e-3)) return v.toExponential(3);
    return String(+v.toPrecision(6));
  }

  // TensorBoard-style debiased exponential moving average; weight 0 leaves values untouched.
  function smooth(values, weight) {
    if (!weight) return values;
    var out = new Array(values.length), num = 0, den = 0;
    for (var i = 0; i < values.length; i++) {
      num = num * weight + (1 - weight) * values[i];
      den = den * weight + (1 - weight);
      out[i] = num / den;
    }
    return out;
  }

  // Text the run filter matches against, per run (id, group, lifecycle and state).
  // Filled once the run table is parsed (this script runs before it, to draw charts sooner).
  var searchText = new Map();

  function matches(runId) {
    if (!state.filter) return true;
    var hay = searchText.has(runId) ? searchText.get(runId) : runId.toLowerCase();
    return hay.indexOf(state.filter) !== -1;
  }

  function visible(runId) { return !state.unchecked.has(runId) && matches(runId); }

  // The transformed (smoothed, log-safe) copy of each series, and the aligned table uPlot draws.
  function transform(chart) {
    var out = [];
    chart.current.forEach(function (s) {
      var vals = smooth(s.values, state.smoothing);
      if (state.log) vals = vals.map(function (v) { return v > 0 ? v : null; });
      out.push({ run_id: s.run_id, steps: s.steps, values: vals });
    });
    return out;
  }

  function align(series) {
    var shared = series.length > 0 && series.every(function (s) {
      if (s.steps.length !== series[0].steps.length) return false;
      for (var i = 0; i < s.steps.length; i++) if (s.steps[i] !== series[0].steps[i]) return false;
      return true;
    });
    var xs;
    if (shared) {
      xs = series[0].steps.slice();
    } else {
      var all = [];
      series.forEach(function (s) { for (var i = 0; i < s.steps.length; i++) all.push(s.steps[i]); });
      all.sort(function (a, b) { return a - b; });
      xs = [];
      for (var i = 0; i < all.length; i++) if (i === 0 || all[i] !== all[i - 1]) xs.push(all[i]);
    }
    var data = [xs];
    series.forEach(function (s) {
      if (shared) { data.push(s.values.slice()); return; }
      var ys = new Array(xs.length).fill(null), j = 0;
      for (var k = 0; k < xs.length && j < s.steps.length; k++) {
        if (xs[k] === s.steps[j]) { ys[k] = s.values[j]; j++; }
      }
      data.push(ys);
    });
    return data;
  }

  // Value of a series at (or just before) a step, by binary search over its own steps.
  function valueAt(s, step) {
    var lo = 0, hi = s.steps.length - 1, found = -1;
    while (lo <= hi) {
      var mid = (lo + hi) >> 1;
      if (s.steps[mid] <= step) { found = mid; lo = mid + 1; } else { hi = mid - 1; }
    }
    if (found < 0) return null;
    return s.values[found];
  }

  function lastValue(s) {
    for (var i = s.values.length - 1; i >= 0; i--) if (s.values[i] !== null) return s.values[i];
    return null;
  }

  function updateLegend(chart) {
    var u = chart.u;
    if (!u) return;
    var idx = u.cursor.idx;
    var step = idx === null || idx === undefined ? null : u.data[0][idx];
    chart.stepCell.textContent = step === null ? "latest" : "step " + step;
    chart.view.forEach(function (s, i) {
      var cell = chart.valueCells[i];
      var text = fmt(step === null ? lastValue(s) : valueAt(s, step));
      if (cell.textContent !== text) cell.textContent = text;
    });
  }

  function updateDensity(chart) {
    var shown = 0, total = 0;
    chart.current.forEach(function (s, i) {
      if (!visible(s.run_id)) return;
      shown += s.steps.length;
      total += chart.meta.series[i].source_points;
    });
    chart.densityEl.textContent = shown + " of " + total + " points shown" + (chart.refined ? " (zoomed detail)" : "");
  }

  function note(chart, text) { chart.noteEl.textContent = text || ""; }

  function options(chart, width) {
    var many = chart.current.length > 20;
    return {
      width: width,
      height: 260,
      scales: { x: { time: false }, y: { distr: state.log ? 3 : 1 } },
      axes: [
        { label: "step", size: 40 },
        { size: 64, values: function (u, vals) { return vals.map(fmt); } }
      ],
      legend: { show: false },
      cursor: {
        drag: { x: true, y: false, setScale: true },
        sync: { key: "stellar-steps" },
        points: { show: !many }
      },
      series: [{ label: "step" }].concat(chart.current.map(function (s, i) {
        return {
          label: s.run_id,
          stroke: chart.meta.series[i].color,
          width: 1.25,
          spanGaps: true,
          points: { show: false },
          show: visible(s.run_id)
        };
      })),
      hooks: {
        setCursor: [function () { updateLegend(chart); }],
        draw: [function () {
          if (api.firstChartAt === null) {
            performance.mark("stellar-first-chart");
            api.firstChartAt = performance.now();
          }
        }],
        setSelect: [function (u) { chart.userZoom = u.select.width > 0; }],
        setScale: [function (u, key) { if (key === "x") onZoom(chart); }]
      }
    };
  }

  function build(chart) {
    if (chart.u) { chart.u.destroy(); chart.u = null; }
    chart.view = transform(chart);
    var data = align(chart.view);
    var width = Math.max(320, chart.plotEl.clientWidth || 640);
    if (data[0].length === 0) {
      note(chart, "Not logged for the runs in this snapshot.");
      return;
    }
    var hiddenByLog = state.log && chart.view.some(function (s, i) {
      return chart.current[i].values.some(function (v) { return !(v > 0); });
    });
    note(chart, hiddenByLog ? "Log scale hides values that are zero or negative." : "");
    chart.u = new uPlot(options(chart, width), data, chart.plotEl);
    updateLegend(chart);
    updateDensity(chart);
  }

  function refreshData(chart) {
    if (!chart.u) { build(chart); return; }
    chart.view = transform(chart);
    var x = chart.u.scales.x;
    var keep = chart.userZoom ? { min: x.min, max: x.max } : null;
    chart.u.setData(align(chart.view), !keep);
    if (keep) chart.u.setScale("x", keep);
    updateLegend(chart);
    updateDensity(chart);
  }

  // When served by `taugrid-portal experiment serve`, a zoom into a sampled chart fetches the
  // zoomed step range at full display resolution from /api/stellar/series.
  function onZoom(chart) {
    if (!servedOverHttp || !seriesPath || !chart.meta.decimated || chart.fetching) return;
    var u = chart.u;
    if (!u || !chart.userZoom) return;
    clearTimeout(chart.zoomTimer);
    chart.zoomTimer = setTimeout(function () {
      var lo = Math.floor(u.scales.x.min), hi = Math.ceil(u.scales.x.max);
      var params = new URLSearchParams({
        target: snapshot.target, metric: chart.meta.metric_name,
        start_step: String(lo), end_step: String(hi),
        max_points: String(snapshot.sampling.max_points_per_series)
      });
      chart.fetching = true;
      fetch(seriesPath + "?" + params.toString(), { headers: { "Accept": "application/json" } })
        .then(function (r) { return r.ok ? r.json() : Promise.reject(new Error("HTTP " + r.status)); })
        .then(function (detail) {
          var byRun = new Map();
          detail.chart.series.forEach(function (s) { byRun.set(s.run_id, s); });
          chart.current = chart.meta.series.map(function (s) {
            var d = byRun.get(s.run_id);
            return d ? { run_id: s.run_id, steps: d.steps, values: d.values } : { run_id: s.run_id, steps: [], values: [] };
          });
          chart.refined = true;
          refreshData(chart);
          chart.u.setScale("x", { min: lo, max: hi });
        })
        .catch(function (err) { note(chart, "Could not load zoomed detail: " + err.message); })
        .then(function () { chart.fetching = false; });
    }, 150);
  }

  function resetZoom(chart) {
    chart.userZoom = false;
    if (chart.refined) {
      chart.refined = false;
      chart.current = chart.full;
      refreshData(chart);
    }
    if (!chart.u) return;
    var xs = chart.u.data[0];
    chart.u.setScale("x", { min: xs[0], max: xs[xs.length - 1] });
  }

  function applyVisibility() {
    document.querySelectorAll("#run-table tbody tr[data-run]").forEach(function (row) {
      var id = row.getAttribute("data-run");
      row.classList.toggle("hidden", !matches(id));
      row.classList.toggle("off", state.unchecked.has(id));
    });
    charts.forEach(function (chart) {
      chart.legendRows.forEach(function (row, i) {
        var id = chart.meta.series[i].run_id;
        var on = visible(id);
        // Filtered-out runs leave the legend; unchecked runs stay (dimmed) so a click brings them back.
        row.classList.toggle("hidden", !matches(id));
        row.classList.toggle("off", state.unchecked.has(id));
        if (chart.u && chart.u.series[i + 1].show !== on) chart.u.setSeries(i + 1, { show: on });
      });
      updateDensity(chart);
    });
  }

  function setup() {
    var figures = document.querySelectorAll("#charts figure.chart");
    figures.forEach(function (fig) {
      var meta = snapshot.charts[Number(fig.getAttribute("data-metric-index"))];
      var full = meta.series.map(function (s) { return { run_id: s.run_id, steps: s.steps, values: s.values }; });
      charts.push({
        meta: meta, el: fig, full: full, current: full, refined: false, userZoom: false, u: null, view: [],
        plotEl: fig.querySelector("[data-plot]"),
        noteEl: fig.querySelector("[data-note]"),
        densityEl: fig.querySelector("[data-density]"),
        stepCell: fig.querySelector("[data-legend-step]"),
        legendRows: Array.prototype.slice.call(fig.querySelectorAll("[data-legend] tbody tr")),
        valueCells: Array.prototype.slice.call(fig.querySelectorAll("[data-legend] tbody [data-value]"))
      });
    });

    document.getElementById("run-filter").addEventListener("input", function (e) {
      state.filter = e.target.value.trim().toLowerCase();
      applyVisibility();
    });
    document.getElementById("metric-filter").addEventListener("input", function (e) {
      var needle = e.target.value.trim().toLowerCase();
      charts.forEach(function (chart) {
        var show = !needle || chart.meta.metric_name.toLowerCase().indexOf(needle) !== -1;
        chart.el.classList.toggle("hidden", !show);
        if (show && chart.u) chart.u.setSize({ width: Math.max(320, chart.plotEl.clientWidth), height: 260 });
      });
    });
    var slider = document.getElementById("smoothing");
    var sliderOut = document.getElementById("smoothing-value");
    slider.addEventListener("input", function () {
      state.smoothing = Number(slider.value);
      sliderOut.textContent = state.smoothing.toFixed(2);
      charts.forEach(refreshData);
    });
    document.getElementById("log-scale").addEventListener("change", function (e) {
      state.log = e.target.checked;
      charts.forEach(build);
    });
    document.getElementById("reset-zoom").addEventListener("click", function () { charts.forEach(resetZoom); });
    document.addEventListener("keydown", function (e) {
      if (e.key === "Escape") charts.forEach(resetZoom);
    });
    // Clicking a legend row toggles that run everywhere (same as its checkbox in the run table).
    charts.forEach(function (chart) {
      chart.legendRows.forEach(function (row) {
        row.addEventListener("click", function () {
          var id = row.getAttribute("data-run");
          var box = document.querySelector('#run-table input.run-toggle[data-run="' + CSS.escape(id) + '"]');
          if (state.unchecked.has(id)) state.unchecked.delete(id); else state.unchecked.add(id);
          if (box) box.checked = !state.unchecked.has(id);
          applyVisibility();
        });
      });
    });
    root.addEventListener("dblclick", function (e) {
      charts.forEach(function (c) { if (c.el.contains(e.target)) { c.userZoom = false; if (c.refined) resetZoom(c); } });
    });
    var resizeTimer = null;
    window.addEventListener("resize", function () {
      clearTimeout(resizeTimer);
      resizeTimer = setTimeout(function () {
        charts.forEach(function (c) { if (c.u) c.u.setSize({ width: Math.max(320, c.plotEl.clientWidth), height: 260 }); });
      }, 100);
    });

    // The run table comes after this script in the page: wire it once it has been parsed.
    var tableReady = false, chartsReady = false;
    function wireRunTable() {
      document.querySelectorAll("#run-table tbody tr[data-run]").forEach(function (row) {
        searchText.set(row.getAttribute("data-run"), row.getAttribute("data-search").toLowerCase());
      });
      document.querySelectorAll(".run-toggle").forEach(function (box) {
        box.addEventListener("change", function () {
          var id = box.getAttribute("data-run");
          if (box.checked) state.unchecked.delete(id); else state.unchecked.add(id);
          applyVisibility();
        });
      });
      tableReady = true;
      api.ready = chartsReady;
      if (state.filter) applyVisibility();
    }
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", wireRunTable);
    else wireRunTable();

    // Draw the first chart now and the rest one per task, so the first paint is not held back
    // by charts further down the page.
    var i = 0;
    function next() {
      if (i >= charts.length) { chartsReady = true; api.ready = tableReady; return; }
      try { build(charts[i]); } catch (err) { api.errors.push(String(err)); note(charts[i], "Chart failed: " + err); }
      i++;
      setTimeout(next, 0);
    }
    next();
  }

  if (typeof uPlot === "undefined") {
    api.errors.push("uPlot is not loaded");
    root.insertAdjacentText("afterbegin", "Stellar could not load its chart library.");
    return;
  }
  setup();
})();
