// Draws every Plotly figure on the page (loaded only on pages with a chart). Figures are
// embedded with Django's json_script and referenced by <div class="chart" data-chart="id">;
// each sits in a <figure> whose caption names it and links the table with the same numbers.
(function () {
  "use strict";
  function theme(layout) {
    // Follow the page's colours (light or dark, prefers-color-scheme) instead of white boxes.
    var css = window.getComputedStyle(document.documentElement);
    var fg = css.getPropertyValue("--fg").trim() || "#111827";
    var line = css.getPropertyValue("--line").trim() || "#e5e7eb";
    layout.paper_bgcolor = "rgba(0,0,0,0)";
    layout.plot_bgcolor = "rgba(0,0,0,0)";
    layout.font = Object.assign({}, layout.font, {color: fg});
    ["xaxis", "yaxis"].forEach(function (k) {
      if (layout[k]) { layout[k].gridcolor = line; layout[k].zerolinecolor = line; }
    });
    if (window.innerWidth < 600) {
      // Narrow screens: smaller margins and font so the plot keeps most of the width.
      layout.margin = Object.assign({}, layout.margin, {l: 40, r: 10});
      layout.font.size = 10;
    }
    return layout;
  }
  function draw() {
    if (typeof Plotly === "undefined") { return; }
    document.querySelectorAll("div.chart[data-chart]").forEach(function (el) {
      var source = document.getElementById(el.dataset.chart);
      if (!source) { return; }
      var fig = JSON.parse(source.textContent);
      if (fig.narrow && window.innerWidth < 600) {
        // The figure's own narrow variant (charts.py): trace and layout keys it replaces.
        (fig.narrow.data || []).forEach(function (over, i) {
          if (fig.data[i]) { Object.assign(fig.data[i], over); }
        });
        Object.assign(fig.layout, fig.narrow.layout || {});
      }
      Plotly.newPlot(el, fig.data, theme(fig.layout), {
        responsive: true, displaylogo: false,
        modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d", "toggleSpikelines"]
      });
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
})();
