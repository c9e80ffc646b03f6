// Copy buttons: <button class="copy" data-copy="#element-id">. Uses the Clipboard API (secure
// contexts), else selects the text and falls back to execCommand; says what happened.
(function () {
  "use strict";
  function selectText(el) {
    var range = document.createRange();
    range.selectNodeContents(el);
    var sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
  }
  function done(button, ok) {
    var label = button.dataset.label || button.textContent;
    button.dataset.label = label;
    button.textContent = ok ? "Copied" : "Selected: press Ctrl+C";
    setTimeout(function () { button.textContent = label; }, 2500);
  }
  document.querySelectorAll("button.copy[data-copy]").forEach(function (button) {
    button.addEventListener("click", function () {
      var el = document.querySelector(button.dataset.copy);
      if (!el) return;
      var text = el.textContent;
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(function () { done(button, true); },
          function () { selectText(el); done(button, false); });
      } else {
        selectText(el);
        var ok = false;
        try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
        done(button, ok);
      }
    });
  });
})();
