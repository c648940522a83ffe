// TauGrid Portal: client-side sort and filter (state in the URL), live refresh of Runs and run detail.
// Everything from the server is written with textContent: run names, labels and log lines stay text.
(function () {
  "use strict";
  var params = new URLSearchParams(location.search);

  function saveParam(key, value) {
    if (value) { params.set(key, value); } else { params.delete(key); }
    var q = params.toString();
    history.replaceState(null, "", location.pathname + (q ? "?" + q : ""));
  }

  function cellValue(row, key) {
    var td = row.querySelector('td[data-key="' + key + '"]');
    if (!td) { return ""; }
    return td.getAttribute("data-sort") || td.textContent.trim();
  }

  function compare(a, b) {
    var x = parseFloat(a), y = parseFloat(b);
    if (!isNaN(x) && !isNaN(y) && String(x) === a.replace(/\/.*$/, "") && String(y) === b.replace(/\/.*$/, "")) {
      return x - y;
    }
    return a.localeCompare(b);
  }

  function applyView(table) {
    var id = table.id, body = table.tBodies[0];
    if (!body) { return; }
    var text = (params.get(id + ".q") || "").toLowerCase();
    var status = params.get(id + ".status") || "";
    var sort = params.get(id + ".sort") || "";
    var rows = Array.prototype.slice.call(body.rows).filter(function (r) { return !r.classList.contains("empty"); });
    rows.forEach(function (r) {
      var okText = !text || r.textContent.toLowerCase().indexOf(text) >= 0;
      var okStatus = !status || r.getAttribute("data-status") === status;
      r.hidden = !(okText && okStatus);
    });
    if (sort) {
      var desc = sort.charAt(0) === "-", key = desc ? sort.slice(1) : sort;
      rows.sort(function (a, b) { var c = compare(cellValue(a, key), cellValue(b, key)); return desc ? -c : c; });
      rows.forEach(function (r) { body.appendChild(r); });
      table.querySelectorAll("th[data-key]").forEach(function (th) {
        th.setAttribute("aria-sort", th.getAttribute("data-key") === key ? (desc ? "descending" : "ascending") : "none");
      });
    }
  }

  function wireTable(table) {
    var id = table.id;
    table.querySelectorAll("th[data-key]").forEach(function (th) {
      th.tabIndex = 0;
      th.addEventListener("click", function () {
        var key = th.getAttribute("data-key"), current = params.get(id + ".sort");
        saveParam(id + ".sort", current === key ? "-" + key : key);
        applyView(table);
      });
    });
    var filter = document.querySelector('[data-filter-for="' + id + '"]');
    if (filter) {
      filter.value = params.get(id + ".q") || "";
      filter.addEventListener("input", function () { saveParam(id + ".q", filter.value); applyView(table); });
    }
    var select = document.querySelector('[data-status-for="' + id + '"]');
    if (select) {
      select.value = params.get(id + ".status") || "";
      select.addEventListener("change", function () { saveParam(id + ".status", select.value); applyView(table); });
    }
    applyView(table);
  }

  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    if (cls) { e.className = cls; }
    return e;
  }

  function banner(message) {
    var b = document.getElementById("banner");
    if (!b) { return; }
    b.textContent = message || "";
    b.hidden = !message;
  }

  function apiQuery() {
    var q = new URLSearchParams();
    ["workspace", "namespace", "include-external"].forEach(function (k) { if (params.get(k)) { q.set(k, params.get(k)); } });
    var s = q.toString();
    return s ? "?" + s : "";
  }

  function runRow(r) {
    var tr = el("tr");
    tr.setAttribute("data-status", r.status);
    var name = el("td"); name.setAttribute("data-key", "name");
    var a = el("a", r.name); a.href = "/portal/runs/" + encodeURIComponent(r.namespace) + "/" + encodeURIComponent(r.name);
    name.appendChild(a);
    if (r.attempt) { name.appendChild(document.createTextNode(" ")); name.appendChild(el("span", "retry " + r.attempt, "tag")); }
    tr.appendChild(name);
    var cells = [["kind", r.kind], ["status", null], ["namespace", r.namespace], ["queue", r.queue], ["source", r.source],
                 ["created", r.age], ["experimentTracking", null]];
    cells.forEach(function (c) {
      var td = el("td", c[1]); td.setAttribute("data-key", c[0]);
      if (c[0] === "status") { td.appendChild(el("span", r.status, "st st-" + String(r.status).toLowerCase())); }
      if (c[0] === "created") { td.title = r.created; }
      if (c[0] === "experimentTracking") {
        if (r.experimentPath && r.experimentPath.indexOf("/stellar?") === 0) {
          var link = el("a", r.experimentTracking); link.href = r.experimentPath; td.appendChild(link);
        } else { td.textContent = r.experimentTracking; }
      }
      tr.appendChild(td);
    });
    return tr;
  }

  function refreshRuns(table) {
    fetch(table.getAttribute("data-live") + apiQuery(), {headers: {"Accept": "application/json"}})
      .then(function (resp) { return resp.json().then(function (doc) { return [resp.status, doc]; }); })
      .then(function (res) {
        var status = res[0], doc = res[1], body = table.tBodies[0];
        if (status !== 200) {
          table.classList.add("stale");
          while (body.firstChild) { body.removeChild(body.firstChild); }
          banner(doc.reason || doc.error || "runs unavailable");
          document.getElementById("freshness").textContent = "not current";
          document.getElementById("runs-count").textContent = "";
          return;
        }
        table.classList.remove("stale");
        banner("");
        var fresh = document.createDocumentFragment();
        doc.runs.forEach(function (r) { fresh.appendChild(runRow(r)); });
        while (body.firstChild) { body.removeChild(body.firstChild); }
        body.appendChild(fresh);
        document.getElementById("runs-count").textContent = doc.total + " runs";
        document.getElementById("freshness").textContent = doc.cache ? "synced " + doc.cache.syncedAt : "";
        applyView(table);
        document.body.setAttribute("data-refreshed", String(Date.now()));
      })
      .catch(function () { banner("the Portal cannot be reached"); });
  }

  function refreshDetail(h1) {
    fetch(h1.getAttribute("data-live-detail") + apiQuery())
      .then(function (resp) { return resp.json().then(function (doc) { return [resp.status, doc]; }); })
      .then(function (res) {
        var status = res[0], doc = res[1];
        if (status !== 200) { banner(doc.reason || doc.error || "run unavailable"); return; }
        banner("");
        var st = document.getElementById("run-status");
        st.textContent = doc.run.status;
        st.className = "st st-" + String(doc.run.status).toLowerCase();
        var list = document.getElementById("phases");
        while (list.firstChild) { list.removeChild(list.firstChild); }
        doc.phases.forEach(function (p) {
          var li = el("li", null, "ph ph-" + p.state);
          li.appendChild(el("b", p.name)); li.appendChild(document.createTextNode(" ")); li.appendChild(el("span", p.detail));
          list.appendChild(li);
        });
        document.body.setAttribute("data-refreshed", String(Date.now()));
      })
      .catch(function () { banner("the Portal cannot be reached"); });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("table[data-table]").forEach(wireTable);
    var every = parseFloat(document.body.getAttribute("data-refresh") || "5") * 1000;
    if (params.get("refresh")) { every = parseFloat(params.get("refresh")) * 1000; }
    var live = document.querySelector("table[data-live]");
    if (live && every > 0) { setInterval(function () { refreshRuns(live); }, every); }
    var detail = document.querySelector("[data-live-detail]");
    if (detail && every > 0) { setInterval(function () { refreshDetail(detail); }, every); }
    document.body.setAttribute("data-ready", "true");
  });
})();
