// Column show/hide on the leaderboard table. Without JavaScript the "Columns" form submits and
// the server answers with the columns hidden (hide=... in the URL); with it, a checkbox hides its
// column at once and the URL is rewritten the same way, so a shared link shows the same table.
(function () {
  "use strict";
  document.querySelectorAll("[data-columns]").forEach(function (box) {
    var table = document.getElementById(box.getAttribute("data-columns"));
    if (!table) { return; }
    var apply = box.querySelector("[data-columns-apply]");
    if (apply) { apply.hidden = true; }
    box.querySelectorAll("input[data-col]").forEach(function (input) {
      input.addEventListener("change", function () {
        table.classList.toggle("hide-" + input.getAttribute("data-col"), !input.checked);
        var url = new URL(window.location.href);
        url.searchParams.delete("hide");
        box.querySelectorAll("input[data-col]").forEach(function (other) {
          if (!other.checked) { url.searchParams.append("hide", other.getAttribute("data-col")); }
        });
        window.history.replaceState(null, "", url.toString());
      });
    });
  });
})();
