// The trajectory viewer, made instant: find as you type (with the matches marked), the step
// filters without a reload, fold and unfold every step, a deep link that opens its step, and
// the arrow keys between trials. Without JavaScript the same form works through the server.
(function () {
  "use strict";
  var list = document.querySelector("[data-testid=steps]");
  var form = document.querySelector("[data-testid=trajectory-find]");
  if (!list || !form) { return; }
  var steps = Array.prototype.slice.call(list.querySelectorAll("li.step"));
  var input = form.querySelector("input[name=q]");
  var count = document.querySelector("[data-testid=match-count]");
  var current = -1;
  form.querySelector(".js-only").hidden = false;

  function clearMarks() {
    list.querySelectorAll("mark.find").forEach(function (m) {
      var parent = m.parentNode;
      parent.replaceChild(document.createTextNode(m.textContent), m);
      parent.normalize();
    });
  }

  function markIn(root, needle) {
    var walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    var nodes = [];
    while (walker.nextNode()) { nodes.push(walker.currentNode); }
    nodes.forEach(function (node) {
      var text = node.nodeValue;
      var lower = text.toLowerCase();
      var at = lower.indexOf(needle);
      if (at < 0) { return; }
      var frag = document.createDocumentFragment();
      var from = 0;
      while (at >= 0) {
        frag.appendChild(document.createTextNode(text.slice(from, at)));
        var mark = document.createElement("mark");
        mark.className = "find";
        mark.textContent = text.slice(at, at + needle.length);
        frag.appendChild(mark);
        from = at + needle.length;
        at = lower.indexOf(needle, from);
      }
      frag.appendChild(document.createTextNode(text.slice(from)));
      node.parentNode.replaceChild(frag, node);
    });
  }

  function checked(name) {
    return Array.prototype.slice.call(form.querySelectorAll("input[name=" + name + "]:checked"))
      .map(function (box) { return box.value; });
  }

  function apply() {
    var needle = input.value.trim().toLowerCase();
    var sources = checked("source");
    var kinds = checked("show");
    clearMarks();
    ["message", "tool", "observation", "reasoning"].forEach(function (k) {
      list.classList.toggle("hide-" + k, kinds.indexOf(k) < 0);
    });
    var matches = 0;
    var shown = 0;
    steps.forEach(function (li) {
      var held = (li.getAttribute("data-kinds") || "").split(" ").filter(Boolean);
      var visible = sources.indexOf(li.getAttribute("data-source")) >= 0 &&
        (!held.length || held.some(function (k) { return kinds.indexOf(k) >= 0; }));
      li.hidden = !visible;
      shown += visible ? 1 : 0;
      var hit = !!needle && li.textContent.toLowerCase().indexOf(needle) >= 0;
      li.classList.toggle("match", hit);
      if (hit) {
        matches += 1;
        li.querySelectorAll("details").forEach(function (d) { d.open = true; });
        markIn(li, needle);
      }
    });
    document.querySelectorAll(".timeline .tl").forEach(function (seg, i) {
      seg.classList.toggle("tl-match", !!steps[i] && steps[i].classList.contains("match"));
    });
    var words = needle ? matches + " step" + (matches === 1 ? "" : "s") + " match \u201c" +
      input.value.trim() + "\u201d." : "";
    if (shown !== steps.length) {
      words += " " + shown + " of " + steps.length + " steps shown by the filter.";
    }
    count.textContent = words.trim();
    current = -1;
    var query = new URLSearchParams(new FormData(form));
    if (!needle) { query.delete("q"); }
    history.replaceState(null, "", "?" + query.toString() + location.hash);
  }

  function go(delta) {
    var hits = steps.filter(function (li) { return li.classList.contains("match") && !li.hidden; });
    if (!hits.length) { return; }
    current = (current + delta + hits.length) % hits.length;
    hits[current].scrollIntoView({ block: "start" });
    hits[current].setAttribute("tabindex", "-1");
    hits[current].focus({ preventScroll: true });
  }

  function openTarget() {
    var target = location.hash && document.getElementById(location.hash.slice(1));
    if (!target || !target.classList.contains("step")) { return; }
    target.hidden = false;
    target.querySelectorAll("details").forEach(function (d) { d.open = true; });
    steps.forEach(function (li) { li.classList.toggle("targeted", li === target); });
    target.scrollIntoView({ block: "start" });
  }

  var timer = null;
  input.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(apply, 150);
  });
  form.addEventListener("change", function (ev) {
    if (ev.target.type === "checkbox") { apply(); }
  });
  form.addEventListener("submit", function (ev) { ev.preventDefault(); apply(); go(1); });
  form.addEventListener("click", function (ev) {
    var action = ev.target.getAttribute && ev.target.getAttribute("data-action");
    if (action === "next-match") { go(1); }
    if (action === "prev-match") { go(-1); }
    if (action === "fold" || action === "unfold") {
      list.querySelectorAll("details.step-fold").forEach(function (d) { d.open = action === "unfold"; });
    }
  });
  document.addEventListener("keydown", function (ev) {
    var tag = (ev.target.tagName || "").toLowerCase();
    if (ev.altKey || ev.ctrlKey || ev.metaKey || tag === "input" || tag === "textarea" ||
        tag === "select" || ev.target.isContentEditable) { return; }
    if (ev.key === "/") { ev.preventDefault(); input.focus(); return; }
    var rel = ev.key === "ArrowLeft" ? "prev" : ev.key === "ArrowRight" ? "next" : null;
    var link = rel && document.querySelector("[data-testid=trajectory-nav] a[rel=" + rel + "]");
    if (link) { ev.preventDefault(); location.href = link.href; }
  });
  window.addEventListener("hashchange", openTarget);
  if (input.value.trim()) { apply(); }
  openTarget();
})();
