from jinja2.runtime import LoopContext, Macro, Markup, Namespace, TemplateNotFound, TemplateReference, TemplateRuntimeError, Undefined, escape, identity, internalcode, markup_join, missing, str_join
name = 'landing.html'

def root(context, missing=missing):
    resolve = context.resolve_or_missing
    undefined = environment.undefined
    concat = environment.concat
    cond_expr_undefined = Undefined
    if 0: yield None
    l_0_projects = resolve('projects')
    l_0_kernels = resolve('kernels')
    l_0_wheels = resolve('wheels')
    l_0_labels = resolve('labels')
    l_0_base_url = resolve('base_url')
    try:
        t_1 = environment.filters['length']
    except KeyError:
        @internalcode
        def t_1(*unused):
            raise TemplateRuntimeError("No filter named 'length' found.")
    pass
    yield '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<meta name="viewport" content="width=device-width, initial-scale=1">\n<title>Kernel wheels</title>\n<style>\n'
    template = environment.get_template('style.css', 'landing.html')
    gen = template.root_render_func(template.new_context(context.get_all(), True, {}))
    try:
        for event in gen:
            yield event
    finally: gen.close()
    yield '</style>\n</head>\n<body>\n<h1>Kernel wheels</h1>\n<p class="muted">'
    yield escape(t_1((undefined(name='projects') if l_0_projects is missing else l_0_projects)))
    yield ' project'
    yield escape(('' if (t_1((undefined(name='projects') if l_0_projects is missing else l_0_projects)) == 1) else 's'))
    yield ' ('
    yield escape((undefined(name='kernels') if l_0_kernels is missing else l_0_kernels))
    yield ' kernel'
    yield escape(('' if ((undefined(name='kernels') if l_0_kernels is missing else l_0_kernels) == 1) else 's'))
    yield '),\n'
    yield escape((undefined(name='wheels') if l_0_wheels is missing else l_0_wheels))
    yield ' wheel'
    yield escape(('' if ((undefined(name='wheels') if l_0_wheels is missing else l_0_wheels) == 1) else 's'))
    yield ', '
    yield escape(t_1((undefined(name='labels') if l_0_labels is missing else l_0_labels)))
    yield ' build variant'
    yield escape(('' if (t_1((undefined(name='labels') if l_0_labels is missing else l_0_labels)) == 1) else 's'))
    yield '.\nPackage index: <a href="./simple/">simple/</a> (PEP 503 and PEP 691).</p>\n\n<div class="note install">\n<strong>Pin the variant, or use its own index.</strong>\nThe combined index <code>'
    yield escape((undefined(name='base_url') if l_0_base_url is missing else l_0_base_url))
    yield "/simple</code> holds every build variant of every kernel. Pin the\nversion with its label (<code>name==1.2.3+torch27cu128cxx11</code>) when you install from it. For an\nunpinned install, use the variant's own index, <code>"
    yield escape((undefined(name='base_url') if l_0_base_url is missing else l_0_base_url))
    yield '/variants/&lt;label&gt;/simple</code>:\nversion labels compare as strings, so <code>+torch210…</code> sorts below <code>+torch27…</code> and an unpinned\ninstall from the combined index can pick a wheel built for an older torch.\nOn each project\'s page, <em>copy pinned</em> and <em>copy unpinned</em> copy these commands for one wheel:\n<div class="cmd"><code>pip install &lt;name&gt;==&lt;version&gt;+&lt;label&gt; --index-url '
    yield escape((undefined(name='base_url') if l_0_base_url is missing else l_0_base_url))
    yield '/simple</code></div>\n<div class="cmd"><code>pip install &lt;name&gt; --index-url '
    yield escape((undefined(name='base_url') if l_0_base_url is missing else l_0_base_url))
    yield '/variants/&lt;label&gt;/simple</code></div>\n</div>\n\n<p><input id="search" type="search" placeholder="Search projects" aria-label="Search projects" autocomplete="off"></p>\n<table class="plain projects" id="projects">\n<thead><tr><th>project</th><th>latest</th><th>wheels</th><th>summary</th></tr></thead>\n<tbody>\n'
    for l_1_p in (undefined(name='projects') if l_0_projects is missing else l_0_projects):
        _loop_vars = {}
        pass
        yield '<tr data-name="'
        yield escape(environment.getattr(l_1_p, 'project'))
        yield '"><td><a href="./projects/'
        yield escape(environment.getattr(l_1_p, 'project'))
        yield '/">'
        yield escape(environment.getattr(l_1_p, 'name'))
        yield '</a></td><td>'
        yield escape(environment.getattr(l_1_p, 'version'))
        yield '</td>\n<td>'
        yield escape(environment.getattr(l_1_p, 'wheels'))
        if environment.getattr(l_1_p, 'variants'):
            pass
            yield ' <span class="muted">('
            yield escape(environment.getattr(l_1_p, 'variants'))
            yield ' variant'
            yield escape(('' if (environment.getattr(l_1_p, 'variants') == 1) else 's'))
            yield ')</span>'
        yield '</td>\n<td class="muted">'
        yield escape(environment.getattr(l_1_p, 'summary'))
        yield '</td></tr>\n'
    l_1_p = missing
    yield '</tbody>\n</table>\n\n'
    if (undefined(name='labels') if l_0_labels is missing else l_0_labels):
        pass
        yield '<h3>Per-variant indexes</h3>\n<p class="muted">Each holds one build variant\'s wheels, the universal wheels and the noarch wheels of its backend.</p>\n<p>'
        l_1_loop = missing
        for l_1_l, l_1_loop in LoopContext((undefined(name='labels') if l_0_labels is missing else l_0_labels), undefined):
            _loop_vars = {}
            pass
            yield '<a href="./variants/'
            yield escape(l_1_l)
            yield '/simple/"><code>'
            yield escape(l_1_l)
            yield '</code></a>'
            yield escape((', ' if (not environment.getattr(l_1_loop, 'last')) else cond_expr_undefined("the inline if-expression on line 44 in 'landing.html' evaluated to false and no else section was defined.")))
        l_1_loop = l_1_l = missing
        yield '</p>\n'
    yield '\n<footer>Commands use <code>'
    yield escape((undefined(name='base_url') if l_0_base_url is missing else l_0_base_url))
    yield '</code>; set <code>base-url</code> in the configuration to the address this index is served from.</footer>\n<script>\n'
    template = environment.get_template('copy.js', 'landing.html')
    gen = template.root_render_func(template.new_context(context.get_all(), True, {}))
    try:
        for event in gen:
            yield event
    finally: gen.close()
    yield '(function () {\n  var box = document.getElementById("search");\n  if (!box) return;\n  var rows = document.querySelectorAll("#projects tbody tr");\n  box.addEventListener("input", function () {\n    var q = box.value.trim().toLowerCase().replace(/[-_.]+/g, "-");\n    rows.forEach(function (tr) { tr.hidden = q !== "" && tr.getAttribute("data-name").indexOf(q) < 0; });\n  });\n})();\n</script>\n</body>\n</html>\n'

blocks = {}
debug_info = '8=23&13=30&14=38&19=46&21=48&25=50&26=52&33=54&34=58&35=66&36=75&41=79&44=83&47=95&49=97'