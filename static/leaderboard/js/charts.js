// Draws every Plotly figure on the page. Figures are embedded with Django's json_script
// (<script type="application/json" id="...">) and referenced by <div class="chart" data-chart="id">.
(function () {
  "use strict";
  function draw() {
    if (typeof Plotly === "undefined") { return; }
    document.querySelectorAll("div.chart[data-chart]").forEach(function (el) {
      var source = document.getElementById(el.dataset.chart);
      if (!source) { return; }
      var fig = JSON.parse(source.textContent);
      Plotly.newPlot(el, fig.data, fig.layout, {responsive: true, displaylogo: false});
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
})();
