from jinja2.runtime import LoopContext, Macro, Markup, Namespace, TemplateNotFound, TemplateReference, TemplateRuntimeError, Undefined, escape, identity, internalcode, markup_join, missing, str_join
name = 'copy.js'

def root(context, missing=missing):
    resolve = context.resolve_or_missing
    undefined = environment.undefined
    concat = environment.concat
    cond_expr_undefined = Undefined
    if 0: yield None
    pass
    yield 'document.addEventListener("click", function (e) {\n  var b = e.target.closest ? e.target.closest("button.copy") : null;\n  if (!b) return;\n  var code = b.previousElementSibling;\n  var text = b.getAttribute("data-cmd") || (code ? code.textContent : "");\n  var label = b.textContent;\n  function done() { b.textContent = "copied"; setTimeout(function () { b.textContent = label; }, 1200); }\n  if (navigator.clipboard && navigator.clipboard.writeText) {\n    navigator.clipboard.writeText(text).then(done, function () { if (code) select(code); });\n  } else if (code) { select(code); }\n  function select(node) {\n    var r = document.createRange(); r.selectNodeContents(node);\n    var s = window.getSelection(); s.removeAllRanges(); s.addRange(r);\n  }\n});\n'

blocks = {}
debug_info = ''