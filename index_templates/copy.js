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
