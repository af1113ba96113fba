from jinja2.runtime import LoopContext, Macro, Markup, Namespace, TemplateNotFound, TemplateReference, TemplateRuntimeError, Undefined, escape, identity, internalcode, markup_join, missing, str_join
name = 'kernel.html'

def root(context, missing=missing):
    resolve = context.resolve_or_missing
    undefined = environment.undefined
    concat = environment.concat
    cond_expr_undefined = Undefined
    if 0: yield None
    l_0_kernel = resolve('kernel')
    l_0_adopted = resolve('adopted')
    l_0_base_url = resolve('base_url')
    l_0_selector = resolve('selector')
    l_0_k = resolve('k')
    l_0_a = resolve('a')
    l_0_labels = resolve('labels')
    try:
        t_1 = environment.filters['join']
    except KeyError:
        @internalcode
        def t_1(*unused):
            raise TemplateRuntimeError("No filter named 'join' found.")
    try:
        t_2 = environment.filters['tojson']
    except KeyError:
        @internalcode
        def t_2(*unused):
            raise TemplateRuntimeError("No filter named 'tojson' found.")
    pass
    yield '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<meta name="viewport" content="width=device-width, initial-scale=1">\n<title>'
    yield escape((environment.getattr((undefined(name='kernel') if l_0_kernel is missing else l_0_kernel), 'name') if (undefined(name='kernel') if l_0_kernel is missing else l_0_kernel) else environment.getattr((undefined(name='adopted') if l_0_adopted is missing else l_0_adopted), 'name')))
    yield '</title>\n<style>\n'
    template = environment.get_template('style.css', 'kernel.html')
    gen = template.root_render_func(template.new_context(context.get_all(), True, {'a': l_0_a, 'k': l_0_k}))
    try:
        for event in gen:
            yield event
    finally: gen.close()
    yield '</style>\n</head>\n<body>\n<p class="muted">Kernel wheels: one project (every project is listed on the index\'s landing page)</p>\n<div class="note install">\n<strong>Pin the variant, or use its own index.</strong>\nThe combined index <code>'
    yield escape((undefined(name='base_url') if l_0_base_url is missing else l_0_base_url))
    yield "/simple</code> holds every build variant of every kernel. Pin the\nversion with its label (<code>name==1.2.3+torch27cu128cxx11</code>) when you install from it. For an\nunpinned install, use the variant's own index, <code>"
    yield escape((undefined(name='base_url') if l_0_base_url is missing else l_0_base_url))
    yield '/variants/&lt;label&gt;/simple</code>:\nversion labels compare as strings, so <code>+torch210…</code> sorts below <code>+torch27…</code> and an unpinned\ninstall from the combined index can pick a wheel built for an older torch.\nIn the tables below, <em>copy pinned</em> and <em>copy unpinned</em> copy these commands for one wheel:\n<div class="cmd"><code>pip install &lt;name&gt;==&lt;version&gt;+&lt;label&gt; --index-url '
    yield escape((undefined(name='base_url') if l_0_base_url is missing else l_0_base_url))
    yield '/simple</code></div>\n<div class="cmd"><code>pip install &lt;name&gt; --index-url '
    yield escape((undefined(name='base_url') if l_0_base_url is missing else l_0_base_url))
    yield '/variants/&lt;label&gt;/simple</code></div>\n</div>\n\n'
    if (undefined(name='selector') if l_0_selector is missing else l_0_selector):
        pass
        yield '<div class="note selector" id="selector">\n<strong>Which build fits?</strong>\n<label>torch <select id="sel-torch"></select></label>\n<label>backend <select id="sel-backend"></select></label>\n<label>arch <select id="sel-arch"></select></label>\n<div id="sel-cmds"></div>\n<span class="muted">Or ask your environment: <code>kernel-factory which --index-url '
        yield escape((undefined(name='base_url') if l_0_base_url is missing else l_0_base_url))
        yield ' --kernel '
        yield escape(environment.getattr((undefined(name='kernel') if l_0_kernel is missing else l_0_kernel), 'project'))
        yield '</code></span>\n</div>\n<script type="application/json" id="kf-builds">'
        yield escape(t_2(context.eval_ctx, (undefined(name='selector') if l_0_selector is missing else l_0_selector)))
        yield '</script>\n'
    yield '\n'
    if (undefined(name='kernel') if l_0_kernel is missing else l_0_kernel):
        pass
        l_0_k = (undefined(name='kernel') if l_0_kernel is missing else l_0_kernel)
        context.vars['k'] = l_0_k
        context.exported_vars.add('k')
        yield '<section class="kernel" id="'
        yield escape(environment.getattr((undefined(name='k') if l_0_k is missing else l_0_k), 'project'))
        yield '">\n<header>\n<h2>'
        yield escape(environment.getattr((undefined(name='k') if l_0_k is missing else l_0_k), 'name'))
        yield '</h2>\n<span class="badge">'
        yield escape(environment.getattr(environment.getitem(environment.getattr((undefined(name='k') if l_0_k is missing else l_0_k), 'versions'), 0), 'version'))
        yield '</span>\n'
        if environment.getattr((undefined(name='k') if l_0_k is missing else l_0_k), 'summary'):
            pass
            yield '<span class="muted">'
            yield escape(environment.getattr((undefined(name='k') if l_0_k is missing else l_0_k), 'summary'))
            yield '</span>'
        yield '</header>\n<div class="meta">\n'
        if environment.getattr((undefined(name='k') if l_0_k is missing else l_0_k), 'license'):
            pass
            yield '<span>licence: '
            yield escape(environment.getattr((undefined(name='k') if l_0_k is missing else l_0_k), 'license'))
            yield '</span>'
        if environment.getattr((undefined(name='k') if l_0_k is missing else l_0_k), 'hub_url'):
            pass
            yield '<span>Hub: <a href="'
            yield escape(environment.getattr((undefined(name='k') if l_0_k is missing else l_0_k), 'hub_url'))
            yield '">'
            yield escape(environment.getattr((undefined(name='k') if l_0_k is missing else l_0_k), 'repo_id'))
            yield '</a></span>'
        if environment.getattr((undefined(name='k') if l_0_k is missing else l_0_k), 'upstream'):
            pass
            yield '<span>source: <a href="'
            yield escape(environment.getattr((undefined(name='k') if l_0_k is missing else l_0_k), 'upstream'))
            yield '">'
            yield escape(environment.getattr((undefined(name='k') if l_0_k is missing else l_0_k), 'upstream'))
            yield '</a></span>'
        if environment.getattr((undefined(name='k') if l_0_k is missing else l_0_k), 'import_name'):
            pass
            yield '<span>import: <code>'
            yield escape(environment.getattr((undefined(name='k') if l_0_k is missing else l_0_k), 'import_name'))
            yield '</code></span>'
        yield '<span>index: <a href="../../simple/'
        yield escape(environment.getattr((undefined(name='k') if l_0_k is missing else l_0_k), 'project'))
        yield '/">simple/'
        yield escape(environment.getattr((undefined(name='k') if l_0_k is missing else l_0_k), 'project'))
        yield '/</a></span>\n</div>\n'
        l_1_loop = missing
        for l_1_v, l_1_loop in LoopContext(environment.getattr((undefined(name='k') if l_0_k is missing else l_0_k), 'versions'), undefined):
            _loop_vars = {}
            pass
            yield '<details class="version"'
            if environment.getattr(l_1_loop, 'first'):
                pass
                yield ' open'
            yield '>\n<summary>'
            yield escape(environment.getattr((undefined(name='k') if l_0_k is missing else l_0_k), 'name'))
            yield ' '
            yield escape(environment.getattr(l_1_v, 'version'))
            yield ' <span class="muted">— '
            yield escape(environment.getattr(l_1_v, 'wheels'))
            yield ' wheel'
            yield escape(('' if (environment.getattr(l_1_v, 'wheels') == 1) else 's'))
            if environment.getattr(l_1_v, 'archs'):
                pass
                yield '; GPU archs '
                yield escape(t_1(context.eval_ctx, environment.getattr(l_1_v, 'archs'), ', '))
            yield '</span></summary>\n<div class="matrix-wrap">\n<table class="matrix">\n<thead><tr><th>framework</th>'
            for l_2_c in environment.getattr(l_1_v, 'columns'):
                _loop_vars = {}
                pass
                yield '<th>'
                yield escape(l_2_c)
                yield '</th>'
            l_2_c = missing
            yield '</tr></thead>\n<tbody>\n'
            for l_2_row in environment.getattr(l_1_v, 'rows'):
                _loop_vars = {}
                pass
                yield '<tr><th>'
                yield escape(environment.getattr(l_2_row, 'title'))
                yield '</th>\n'
                for l_3_cell in environment.getattr(l_2_row, 'cells'):
                    _loop_vars = {}
                    pass
                    if l_3_cell:
                        pass
                        yield '<td>\n'
                        for l_4_e in l_3_cell:
                            _loop_vars = {}
                            pass
                            yield '<div class="entry">\n<a class="label'
                            if environment.getattr(l_4_e, 'yanked'):
                                pass
                                yield ' yanked'
                            yield '" href="'
                            yield escape(environment.getattr(l_4_e, 'href'))
                            yield '">'
                            yield escape((markup_join(('+', environment.getattr(l_4_e, 'label'), )) if environment.getattr(l_4_e, 'label') else 'universal'))
                            yield '</a>\n<div class="plat">'
                            yield escape(environment.getattr(l_4_e, 'platform'))
                            if environment.getattr(l_4_e, 'archs'):
                                pass
                                yield ' · '
                                yield escape(environment.getattr(l_4_e, 'archs'))
                            yield '</div>\n<div class="btns"><button class="copy" type="button" data-cmd="'
                            yield escape(environment.getattr(l_4_e, 'pin_cmd'))
                            yield '">copy pinned</button><button class="copy" type="button" data-cmd="'
                            yield escape(environment.getattr(l_4_e, 'variant_cmd'))
                            yield '">copy unpinned</button></div>\n</div>\n'
                        l_4_e = missing
                        yield '</td>\n'
                    else:
                        pass
                        yield '<td class="empty"></td>\n'
                l_3_cell = missing
                yield '</tr>\n'
            l_2_row = missing
            yield '</tbody>\n</table>\n</div>\n</details>\n'
        l_1_loop = l_1_v = missing
        yield '</section>\n'
    yield '\n'
    if (undefined(name='adopted') if l_0_adopted is missing else l_0_adopted):
        pass
        l_0_a = (undefined(name='adopted') if l_0_adopted is missing else l_0_adopted)
        context.vars['a'] = l_0_a
        context.exported_vars.add('a')
        yield '<section class="kernel" id="'
        yield escape(environment.getattr((undefined(name='a') if l_0_a is missing else l_0_a), 'project'))
        yield '">\n<header>\n<h2>'
        yield escape(environment.getattr((undefined(name='a') if l_0_a is missing else l_0_a), 'name'))
        yield '</h2>\n<span class="badge">'
        yield escape(environment.getitem(environment.getattr((undefined(name='a') if l_0_a is missing else l_0_a), 'versions'), 0))
        yield '</span>\n'
        if environment.getattr((undefined(name='a') if l_0_a is missing else l_0_a), 'summary'):
            pass
            yield '<span class="muted">'
            yield escape(environment.getattr((undefined(name='a') if l_0_a is missing else l_0_a), 'summary'))
            yield '</span>'
        yield '</header>\n<div class="meta"><span>index: <a href="../../simple/'
        yield escape(environment.getattr((undefined(name='a') if l_0_a is missing else l_0_a), 'project'))
        yield '/">simple/'
        yield escape(environment.getattr((undefined(name='a') if l_0_a is missing else l_0_a), 'project'))
        yield '/</a></span>\n<span>versions: '
        yield escape(t_1(context.eval_ctx, environment.getattr((undefined(name='a') if l_0_a is missing else l_0_a), 'versions'), ', '))
        yield '</span></div>\n<div class="cmd"><code>'
        yield escape(environment.getattr((undefined(name='a') if l_0_a is missing else l_0_a), 'pin_cmd'))
        yield '</code><button class="copy" type="button">copy</button></div>\n</section>\n'
    yield '\n'
    if (undefined(name='labels') if l_0_labels is missing else l_0_labels):
        pass
        yield '<h3>Per-variant indexes</h3>\n<p class="muted">Each holds one build variant\'s wheels, the universal wheels and the noarch wheels of its backend.</p>\n<p>'
        l_1_loop = missing
        for l_1_l, l_1_loop in LoopContext((undefined(name='labels') if l_0_labels is missing else l_0_labels), undefined):
            _loop_vars = {}
            pass
            yield '<a href="../../variants/'
            yield escape(l_1_l)
            yield '/simple/'
            yield escape(environment.getattr(((undefined(name='kernel') if l_0_kernel is missing else l_0_kernel) or (undefined(name='adopted') if l_0_adopted is missing else l_0_adopted)), 'project'))
            yield '/"><code>'
            yield escape(l_1_l)
            yield '</code></a>'
            yield escape((', ' if (not environment.getattr(l_1_loop, 'last')) else cond_expr_undefined("the inline if-expression on line 103 in 'kernel.html' evaluated to false and no else section was defined.")))
        l_1_loop = l_1_l = missing
        yield '</p>\n'
    yield '\n<footer>Commands use <code>'
    yield escape((undefined(name='base_url') if l_0_base_url is missing else l_0_base_url))
    yield '</code>; set <code>base-url</code> in the configuration to the address this index is served from.</footer>\n<script>\n'
    template = environment.get_template('copy.js', 'kernel.html')
    gen = template.root_render_func(template.new_context(context.get_all(), True, {'a': l_0_a, 'k': l_0_k}))
    try:
        for event in gen:
            yield event
    finally: gen.close()
    yield '</script>\n'
    if (undefined(name='selector') if l_0_selector is missing else l_0_selector):
        pass
        yield '<script>\n'
        template = environment.get_template('selector.js', 'kernel.html')
        gen = template.root_render_func(template.new_context(context.get_all(), True, {'a': l_0_a, 'k': l_0_k}))
        try:
            for event in gen:
                yield event
        finally: gen.close()
        yield '</script>\n'
    yield '</body>\n</html>\n'

blocks = {}
debug_info = '6=31&8=33&15=40&17=42&21=44&22=46&25=48&32=51&34=55&37=58&38=60&39=64&41=66&42=68&43=70&46=76&47=81&48=88&49=95&50=101&52=106&53=110&54=114&57=126&59=134&60=138&61=140&62=143&64=146&66=150&67=158&68=164&86=180&87=182&88=186&90=188&91=190&92=192&94=198&95=202&96=204&100=207&103=211&106=225&108=227&110=234&112=237'