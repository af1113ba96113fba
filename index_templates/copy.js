(function () {
  // Without base-url the pages say INDEX_URL in their commands: over http(s) the page's own address says it.
  var foot = document.querySelector("footer[data-root]");
  if (!foot || !/^https?:$/.test(location.protocol)) return;
  var token = foot.getAttribute("data-placeholder");
  var root = new URL(foot.getAttribute("data-root"), location.href).href.replace(/\/$/, "");
  var walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (var n = walk.nextNode(); n; n = walk.nextNode()) {
    if (n.nodeValue.indexOf(token) >= 0) n.nodeValue = n.nodeValue.split(token).join(root);
  }
  document.querySelectorAll("[data-cmd]").forEach(function (b) {
    b.setAttribute("data-cmd", b.getAttribute("data-cmd").split(token).join(root));
  });
  foot.textContent = "Commands use " + root + ", the address this page was loaded from.";
  foot.removeAttribute("data-placeholder");
})();
document.addEventListener("click", function (e) {
  var b = e.target.closest ? e.target.closest("button.copy") : null;
  if (!b) return;
  var code = b.previousElementSibling;
  var text = b.getAttribute("data-cmd") || (code ? code.textContent : "");
  var label = b.textContent;
  function done() { b.textContent = "copied"; setTimeout(function () { b.textContent = label; }, 1200); }
  if (navigator.clipboard && navigator.clipboard.writeText) {
    navigator.clipboard.writeText(text).then(done, function () { if (code) select(code); });
  } else if (code) { select(code); }
  function select(node) {
    var r = document.createRange(); r.selectNodeContents(node);
    var s = window.getSelection(); s.removeAllRanges(); s.addRange(r);
  }
});
