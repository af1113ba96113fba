from jinja2.runtime import LoopContext, Macro, Markup, Namespace, TemplateNotFound, TemplateReference, TemplateRuntimeError, Undefined, escape, identity, internalcode, markup_join, missing, str_join
name = 'root.html'

def root(context, missing=missing):
    resolve = context.resolve_or_missing
    undefined = environment.undefined
    concat = environment.concat
    cond_expr_undefined = Undefined
    if 0: yield None
    l_0_api_version = resolve('api_version')
    l_0_projects = resolve('projects')
    pass
    yield '<!DOCTYPE html>\n<html>\n<head>\n<meta charset="utf-8">\n<meta name="pypi:repository-version" content="'
    yield escape((undefined(name='api_version') if l_0_api_version is missing else l_0_api_version))
    yield '">\n<title>Simple index</title>\n</head>\n<body>\n'
    for l_1_name in (undefined(name='projects') if l_0_projects is missing else l_0_projects):
        _loop_vars = {}
        pass
        yield '<a href="./'
        yield escape(l_1_name)
        yield '/">'
        yield escape(l_1_name)
        yield '</a><br>\n'
    l_1_name = missing
    yield '</body>\n</html>\n'

blocks = {}
debug_info = '5=14&9=16&10=20'