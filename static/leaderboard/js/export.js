// The export bar of a table or chart page (templates/_partials/export.html): copies the page's
// table as Markdown, or the permalink, to the clipboard. The CSV, SVG and permalink themselves
// are plain links that work without JavaScript.
(function () {
  "use strict";
  // Export: the table as the reader sees it (hidden columns left out), as Markdown.
  function cellText(cell) {
    return cell.innerText.replace(/\s+/g, " ").trim().replace(/\|/g, "\\|");
  }
  function markdown(bar, table) {
    var rows = Array.prototype.map.call(table.rows, function (row) {
      return Array.prototype.filter.call(row.cells, function (c) {
        return c.getClientRects().length > 0;
      }).map(cellText);
    }).filter(function (r) { return r.length; });
    if (!rows.length) { return ""; }
    var line = function (r) { return "| " + r.join(" | ") + " |"; };
    var out = [line(rows[0]), line(rows[0].map(function () { return "---"; }))];
    rows.slice(1).forEach(function (r) { out.push(line(r)); });
    var source = bar.dataset.source + " · " + bar.querySelector("a.permalink").href;
    return out.join("\n") + "\n\n" + source + (bar.dataset.notice ? "\n" + bar.dataset.notice : "") + "\n";
  }
  function copy(bar, text, done) {
    var status = bar.querySelector(".export-status");
    if (!navigator.clipboard) {
      status.textContent = "This browser offers no clipboard here: use the links.";
      return;
    }
    navigator.clipboard.writeText(text).then(function () {
      status.textContent = done;
    }, function () {
      status.textContent = "Copying was refused by the browser.";
    });
  }
  document.querySelectorAll("div.export-bar").forEach(function (bar) {
    var table = document.getElementById(bar.dataset.tableId);
    var md = bar.querySelector("button.export-md");
    var link = bar.querySelector("button.export-permalink");
    if (md && table) {
      md.addEventListener("click", function () {
        copy(bar, markdown(bar, table), "Table copied as Markdown.");
      });
    }
    if (link) {
      link.addEventListener("click", function () {
        copy(bar, bar.querySelector("a.permalink").href, "Permalink copied.");
      });
    }
  });
})();
