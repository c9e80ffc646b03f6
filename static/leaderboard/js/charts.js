// Charts on the pages with a chart (export.js does the export bar). Every chart is already on the page as the
// server's SVG (leaderboard/chart_svg.py); Plotly (1.5 MB) is fetched only when a reader
// presses "Interactive chart", so it never weighs on the first paint. Figures are embedded
// with Django's json_script and referenced by <div class="chart" data-chart="id">.
(function () {
  "use strict";
  var me = document.currentScript;
  var plotlySrc = me && me.dataset.plotly;
  var plotly = null;

  function loadPlotly() {
    if (window.Plotly) { return Promise.resolve(); }
    if (!plotly) {
      plotly = new Promise(function (resolve, reject) {
        var s = document.createElement("script");
        s.src = plotlySrc;
        s.onload = resolve;
        s.onerror = function () { plotly = null; reject(new Error("Plotly did not load")); };
        document.head.appendChild(s);
      });
    }
    return plotly;
  }

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

  function draw(el) {
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
    // The SVG's height, kept while Plotly draws: nothing below it moves.
    el.style.minHeight = el.getBoundingClientRect().height + "px";
    el.textContent = "";
    el.classList.add("chart-live");
    Plotly.newPlot(el, fig.data, theme(fig.layout), {
      responsive: true, displaylogo: false,
      modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d", "toggleSpikelines"]
    });
  }

  document.querySelectorAll("button.chart-interactive").forEach(function (button) {
    var el = document.querySelector('div.chart[data-chart="' + button.dataset.chartFor + '"]');
    if (!el) { return; }
    button.addEventListener("click", function () {
      button.disabled = true;
      button.textContent = "Loading the interactive chart…";
      loadPlotly().then(function () {
        draw(el);
        button.hidden = true;
      }, function () {
        button.disabled = false;
        button.textContent = "Interactive chart (failed to load: try again)";
      });
    });
  });
})();
