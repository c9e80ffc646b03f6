// Site-wide behaviour, loaded on every page (small; no dependencies): the collapsing menu on
// narrow screens. Without JavaScript the menu stays open and the button stays hidden.
(function () {
  "use strict";
  // Controls that need JavaScript (class js-only) are laid out from the first paint when it
  // runs, and never shown when it does not: nothing moves when the page's scripts start.
  document.documentElement.classList.add("js");
  var header = document.querySelector("[data-menu]");
  if (!header) { return; }
  var button = header.querySelector(".menu-button");
  header.classList.add("js-menu");
  button.hidden = false;
  button.addEventListener("click", function () {
    var open = button.getAttribute("aria-expanded") !== "true";
    button.setAttribute("aria-expanded", String(open));
    header.classList.toggle("menu-open", open);
  });
  document.addEventListener("keydown", function (ev) {
    if (ev.key === "Escape" && header.classList.contains("menu-open")) {
      button.setAttribute("aria-expanded", "false");
      header.classList.remove("menu-open");
      button.focus();
    }
  });
})();
