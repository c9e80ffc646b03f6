// Live status: polls the submission's JSON every 3 s. The counters (status, progress, queue
// position, the verification job's checks) change in place; when the status or the job's state
// changes, the page is reloaded once, so the verdict, the badge, the history and the trials
// table are the server's, never left as they were when the page was opened.
// While an upload is validated (received, validating) it polls every second.
(function () {
  "use strict";
  var box = document.querySelector('[data-testid="submission-status"]');
  if (!box) { return; }
  var FINAL = ["rejected", "refused", "published", "withdrawn"];
  var INTAKE = ["received", "validating"];
  function field(name) { return document.querySelector('[data-field="' + name + '"]'); }
  function text(name) { var el = field(name); return el ? el.textContent.trim() : null; }
  function put(name, value) { var el = field(name); if (el) { el.textContent = value; } }
  var shown = {status: text("status"), job: text("job-status")};
  function render(doc) {
    put("status", doc.status);
    put("progress", doc.progress.done + "/" + doc.progress.total);
    put("queue_position", doc.queue_position === null ? "–" : String(doc.queue_position));
    if (doc.intake && doc.intake.state === "validating") {
      put("intake", "extracting the archive, checking the Harbor runs and the metadata, " +
        "scanning for credentials (attempt " + doc.intake.attempt + ")");
    }
    var v = doc.verification || {};
    if (v.job) {
      put("job-status", v.status);
      put("job-attempt", String(v.attempt));
      put("regraded", String(v.regrade.done));
      put("replayed", String(v.replay.done));
      put("screened", String(v.screen.done));
      put("rerun", String(v.rerun.done));
    }
    return doc.status !== shown.status || (v.job ? v.status : null) !== shown.job;
  }
  function poll() {
    fetch(box.dataset.statusUrl, {credentials: "same-origin", headers: {Accept: "application/json"}})
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (doc) {
        if (!doc) { return; }
        if (render(doc)) { window.location.reload(); return; }
        if (FINAL.indexOf(doc.status) === -1) {
          window.setTimeout(poll, INTAKE.indexOf(doc.status) !== -1 ? 1000 : 3000);
        }
      })
      .catch(function () { window.setTimeout(poll, 10000); });
  }
  window.setTimeout(poll, INTAKE.indexOf(shown.status) !== -1 ? 1000 : 3000);
})();
