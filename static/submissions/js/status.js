// Live status: polls the submission's JSON every 3 s and updates the page until a final state.
(function () {
  "use strict";
  var box = document.querySelector('[data-testid="submission-status"]');
  if (!box) { return; }
  var FINAL = ["rejected", "published", "withdrawn"];
  function render(doc) {
    box.querySelector('[data-field="status"]').textContent = doc.status;
    box.querySelector('[data-field="progress"]').textContent =
      doc.progress.done + "/" + doc.progress.total;
    box.querySelector('[data-field="queue_position"]').textContent =
      doc.queue_position === null ? "–" : String(doc.queue_position);
  }
  function poll() {
    fetch(box.dataset.statusUrl, {credentials: "same-origin", headers: {Accept: "application/json"}})
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (doc) {
        if (!doc) { return; }
        render(doc);
        if (FINAL.indexOf(doc.status) === -1) { window.setTimeout(poll, 3000); }
      })
      .catch(function () { window.setTimeout(poll, 10000); });
  }
  window.setTimeout(poll, 3000);
})();
