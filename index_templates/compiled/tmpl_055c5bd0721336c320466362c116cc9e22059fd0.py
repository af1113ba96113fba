from jinja2.runtime import LoopContext, Macro, Markup, Namespace, TemplateNotFound, TemplateReference, TemplateRuntimeError, Undefined, escape, identity, internalcode, markup_join, missing, str_join
name = 'project.html'

def root(context, missing=missing):
    resolve = context.resolve_or_missing
    undefined = environment.undefined
    concat = environment.concat
    cond_expr_undefined = Undefined
    if 0: yield None
    l_0_api_version = resolve('api_version')
    l_0_project = resolve('project')
    l_0_files = resolve('files')
    try:
        t_1 = environment.tests['none']
    except KeyError:
        @internalcode
        def t_1(*unused):
            raise TemplateRuntimeError("No test named 'none' found.")
    pass
    yield '<!DOCTYPE html>\n<html>\n<head>\n<meta charset="utf-8">\n<meta name="pypi:repository-version" content="'
    yield escape((undefined(name='api_version') if l_0_api_version is missing else l_0_api_version))
    yield '">\n<title>Links for '
    yield escape((undefined(name='project') if l_0_project is missing else l_0_project))
    yield '</title>\n</head>\n<body>\n<h1>Links for '
    yield escape((undefined(name='project') if l_0_project is missing else l_0_project))
    yield '</h1>\n'
    for l_1_f in (undefined(name='files') if l_0_files is missing else l_0_files):
        _loop_vars = {}
        pass
        yield '<a href="'
        yield escape(environment.getattr(l_1_f, 'href'))
        yield '"'
        if environment.getattr(l_1_f, 'requires_python'):
            pass
            yield ' data-requires-python="'
            yield escape(environment.getattr(l_1_f, 'requires_python'))
            yield '"'
        if environment.getattr(l_1_f, 'metadata'):
            pass
            yield ' data-core-metadata="'
            yield escape(environment.getattr(l_1_f, 'metadata'))
            yield '" data-dist-info-metadata="'
            yield escape(environment.getattr(l_1_f, 'metadata'))
            yield '"'
        if (not t_1(environment.getattr(l_1_f, 'yanked'))):
            pass
            yield ' data-yanked="'
            yield escape(environment.getattr(l_1_f, 'yanked'))
            yield '"'
        yield '>'
        yield escape(environment.getattr(l_1_f, 'filename'))
        yield '</a><br>\n'
    l_1_f = missing
    yield '</body>\n</html>\n'

blocks = {}
debug_info = '5=21&6=23&9=25&10=27&11=31'