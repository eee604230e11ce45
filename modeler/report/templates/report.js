// Tabs, table sorting and filtering. Without JavaScript every section stays visible.
(function () {
  "use strict";
  var views = Array.prototype.slice.call(document.querySelectorAll("section.view"));
  var links = Array.prototype.slice.call(document.querySelectorAll("nav a[data-view]"));
  function show(id) {
    var found = id === "all" || views.some(function (v) { return v.id === id; });
    if (!found) { id = views.length ? views[0].id : ""; }
    views.forEach(function (v) { v.hidden = id !== "all" && v.id !== id; });
    links.forEach(function (a) { a.classList.toggle("active", a.getAttribute("data-view") === id); });
  }
  links.forEach(function (a) {
    a.addEventListener("click", function (e) {
      e.preventDefault();
      var id = a.getAttribute("data-view");
      history.replaceState(null, "", "#" + id);
      show(id);
    });
  });
  // A link to a region opens the regions view and scrolls to it.
  document.addEventListener("click", function (e) {
    var a = e.target.closest ? e.target.closest("a.region-link") : null;
    if (!a) { return; }
    e.preventDefault();
    show("regions");
    var target = document.getElementById(a.getAttribute("href").slice(1));
    if (target) { target.scrollIntoView(); }
  });
  // a link to an element inside a view (report.html#region-3) opens that view and scrolls to it
  var start = (location.hash || "").slice(1);
  var startEl = start ? document.getElementById(start) : null;
  var startView = startEl && startEl.closest ? startEl.closest("section.view") : null;
  show(startView ? startView.id : start);
  if (startView && startEl !== startView) { startEl.scrollIntoView(); }

  function cellValue(td) {
    var v = td.getAttribute("data-sort");
    if (v === null) { return td.textContent.trim().toLowerCase(); }
    var n = parseFloat(v);
    return isNaN(n) ? v : n;
  }
  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
    var heads = table.querySelectorAll("th");
    Array.prototype.forEach.call(heads, function (th, col) {
      th.classList.add("sortable");
      th.addEventListener("click", function () {
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        var dir = th.getAttribute("data-dir") === "desc" ? 1 : -1;
        Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("data-dir"); });
        th.setAttribute("data-dir", dir === 1 ? "asc" : "desc");
        rows.sort(function (a, b) {
          var x = cellValue(a.cells[col]), y = cellValue(b.cells[col]);
          if (typeof x === "number" && typeof y === "number") { return (x - y) * dir; }
          return String(x).localeCompare(String(y), undefined, {numeric: true}) * dir;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
  Array.prototype.forEach.call(document.querySelectorAll("input.filter"), function (input) {
    var table = document.getElementById(input.getAttribute("data-table"));
    var count = document.getElementById(input.getAttribute("data-count"));
    input.addEventListener("input", function () {
      var q = input.value.trim().toLowerCase();
      var shown = 0;
      Array.prototype.forEach.call(table.tBodies[0].rows, function (r) {
        var hit = !q || r.textContent.toLowerCase().indexOf(q) >= 0;
        r.hidden = !hit;
        if (hit) { shown += 1; }
      });
      if (count) { count.textContent = String(shown); }
    });
  });
  // Call tree: a fold button hides every row that lists its row among its ancestors.
  var tree = document.getElementById("call-tree");
  if (tree) {
    tree.addEventListener("click", function (e) {
      var button = e.target.closest ? e.target.closest("button.fold") : null;
      if (!button) { return; }
      var id = button.closest("tr").getAttribute("data-id");
      var open = button.getAttribute("aria-expanded") !== "true";
      button.setAttribute("aria-expanded", open ? "true" : "false");
      button.textContent = open ? "\u25be" : "\u25b8";
      var rows = tree.tBodies[0].rows;
      // the folded rows, looked up once (a lookup per row and ancestor took 57 s at 20k call paths)
      var folded = {};
      if (open) {
        Array.prototype.forEach.call(tree.querySelectorAll('button.fold[aria-expanded="false"]'), function (b) {
          folded[b.closest("tr").getAttribute("data-id")] = true;
        });
      }
      Array.prototype.forEach.call(rows, function (r) {
        var anc = (r.getAttribute("data-anc") || "").split(" ");
        if (anc.indexOf(id) < 0) { return; }
        if (!open) { r.hidden = true; return; }
        // unfolding shows a row only when no other ancestor of it is folded
        r.hidden = anc.some(function (a) { return folded[a] === true; });
      });
    });
  }
  document.documentElement.setAttribute("data-ready", "1");
})();
