#!/usr/bin/env python3
"""measure.py -- the structure figures of issues 13 and 29, read from the tree:

issue 13: duplicate pairs (from `duplicates`, when it is on PATH), functions over
100 lines, functions taking more than 6 parameters, files over 1,000 lines;
issue 29 ("Measured today"): routes declared ROUTE_AUTH_NONE whose handler checks
a session itself, copies of the grant check, branches on the store's engine
outside the backend files, JWS verifiers, base64url copies, form_get on the
request's parameters in handlers, functions over 60 and over 100 lines, and the
circles of files that use each other's names.

A function is a definition whose body opens with "{" in column 0 and closes with
"}" in column 0 (docs/style.md "Layout and layers").  -v lists what each figure
counts."""
import glob, os, re, shutil, subprocess, sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
SERVER = os.path.join(ROOT, 'server')
VERBOSE = '-v' in sys.argv


def strip(src):
    """The C text without comments and with string literals emptied: what the
    compiler reads, for counting calls and names."""
    src = re.sub(r'/\*.*?\*/', lambda m: '\n' * m.group(0).count('\n'), src, flags=re.S)
    src = re.sub(r'//[^\n]*', '', src)
    return re.sub(r'"(\\.|[^"\\\n])*"', '""', src)


def functions(lines):
    """(name, params, static, first line, body lines) of each definition."""
    i = 0
    while i < len(lines):
        if lines[i] == '{':
            # The declaration: back up to the line that starts the signature.
            j = i - 1
            while j > 0 and not re.match(r'^[A-Za-z_]', lines[j]):
                j -= 1
            sig = ' '.join(lines[j:i])
            m = re.search(r'([A-Za-z_]\w*)\s*\((.*)\)\s*$', sig)
            k = i + 1
            while k < len(lines) and lines[k] != '}':
                k += 1
            if m and '=' not in sig.split('(')[0]:
                yield m.group(1), m.group(2), sig.lstrip().startswith('static'), j, lines[i + 1:k]
            i = k
        i += 1


def read(path):
    return open(path, encoding='utf-8').read()


sources = {os.path.basename(p): read(p) for p in sorted(glob.glob(os.path.join(SERVER, '*.c')))}
stripped = {n: strip(s) for n, s in sources.items()}
fns = {n: list(functions(s.split('\n'))) for n, s in stripped.items()}
raw_fns = {n: list(functions(s.split('\n'))) for n, s in sources.items()}
# The file kinds, as scripts/lint.sh names them.
handlers = sorted(n for n in sources if re.search(r'_(pages|api)\.c$', n) or n in ('meta.c', 'pages.c'))
http_side = ['http.c', 'router.c', 'routes.c', 'page.c', 'main.c', 'client_auth.c', 'dpop.c']
rows = []          # (what, figure, details)


def row(what, figure, details=()):
    rows.append((what, figure, list(details)))


# --- issue 13's figures ------------------------------------------------------
long_fns, mid_fns, many_params, big_files = [], [], [], []
for name, src in sources.items():
    n_lines = src.count('\n')
    if n_lines > 1000:
        big_files.append((n_lines, name))
    for fn, params, _static, _j, body in raw_fns[name]:
        depth, n = 0, (0 if params.strip() in ('', 'void') else 1)
        for ch in params:
            depth += ch == '('
            depth -= ch == ')'
            n += ch == ',' and depth == 0
        if len(body) > 100:
            long_fns.append((len(body), f'{name}:{fn}'))
        if len(body) > 60:
            mid_fns.append((len(body), f'{name}:{fn}'))
        if n > 6:
            many_params.append((n, f'{name}:{fn}'))

pairs = substantive = None
if shutil.which('duplicates'):
    out = subprocess.run(['duplicates', '--repo', SERVER, '--seconds', '120'],
                         capture_output=True, text=True).stdout
    head = re.search(r'^(\d+) pairs? of places.*$', out, re.M)
    if head:
        pairs = int(head.group(1))
        boiler = re.search(r'(\d+) of those marked boilerplate', head.group(0))
        substantive = pairs - (int(boiler.group(1)) if boiler else 0)

# --- issue 29 ------------------------------------------------------------------
# 1. Routes declared ROUTE_AUTH_NONE whose handler checks a session itself: the
# handler, or a function it reaches among the handlers' and pages' own, calls
# one of the session checks.
SESSION_CHECKS = ('login_require', 'page_form_session', 'session_from_cookie')
callees = {}                       # function -> the names its body mentions
for name in handlers + ['page.c', 'login_pages.c']:
    for fn, _p, _s, _j, body in fns.get(name, []):
        callees.setdefault(fn, set()).update(re.findall(r'\b([A-Za-z_]\w*)\s*\(', '\n'.join(body)))


def checks_session(fn, seen=None):
    seen = seen if seen is not None else set()
    if fn in seen or fn not in callees:
        return None
    seen.add(fn)
    for c in sorted(callees[fn]):
        if c in SESSION_CHECKS:
            return c
        if c not in SESSION_CHECKS and (hit := checks_session(c, seen)):
            return f'{c} -> {hit}'
    return None


def route_entries(src):
    """The top-level { ... } entries of routes.c's http_routes array."""
    start = src.find('http_routes[]')
    i = src.find('{', start)
    depth, entry_start = 0, None
    for k in range(i, len(src)):
        ch = src[k]
        if ch == '{':
            depth += 1
            if depth == 2:
                entry_start = k
        elif ch == '}':
            depth -= 1
            if depth == 1 and entry_start is not None:
                yield src[entry_start:k + 1]
                entry_start = None
            if depth == 0:
                return


none_session = []
for e in route_entries(re.sub(r'/\*.*?\*/', '', sources['routes.c'], flags=re.S)):
    path = re.search(r'"([^"]*)"', e)
    method = re.search(r'\bHTTP_([A-Z]+)\b', e)
    handler = re.search(r'\.handler\s*=\s*(\w+)', e) or \
        re.search(r'^\{\s*HTTP_\w+\s*,\s*"[^"]*"\s*,\s*\w+\s*,\s*(\w+)', e)
    auth = re.search(r'\bROUTE_AUTH_[A-Z_]+\b', e)
    if not (path and handler) or (auth and auth.group(0) != 'ROUTE_AUTH_NONE'):
        continue
    hit = checks_session(handler.group(1))
    if hit:
        none_session.append(f'{method.group(1) if method else "?"} {path.group(1)}: '
                            f'{handler.group(1)} -> {hit}')
row('routes declared NONE that check a session themselves', len(none_session), none_session)

# 2. Copies of the grant check: grant_validate called from a handler file.
grant_calls = [f'{n}:{i + 1}' for n in handlers for i, l in enumerate(stripped[n].split('\n'))
               if re.search(r'\bgrant_validate\s*\(', l)]
row('copies of the grant check (grant_validate called in handlers)', len(grant_calls), grant_calls)

# 3. Branches on the store's engine outside the backend files: a test of a
# ->pg member (== / != NULL, !, if (x->pg), x->pg ?), or a call of
# store_is_pg*(); choosing the backend for a URL at open (pg_is_url) is the
# dispatcher's own work and not counted, nor is passing x->pg on.
BACKENDS = {'store_pg.c', 'store_sqlite.c', 'store_lite.c'}
engine = []
for n, s in stripped.items():
    if n in BACKENDS:
        continue
    for i, l in enumerate(s.split('\n')):
        k = len(re.findall(r'->pg\s*[!=]=\s*NULL|!\s*\w+->pg\b|\bif\s*\(\s*\w+->pg\s*[)&|]'
                           r'|\w->pg\s*\?|\bstore_is_pg(?:_conn)?\s*\(', l))
        if re.match(r'\s*bool store_is_pg', l):   # their definitions
            k = 0
        engine += [f'{n}:{i + 1}'] * k
row('engine branches outside the backend files', len(engine),
    [f'{f}: {sum(x.startswith(f + ":") for x in engine)} (lines {", ".join(x.split(":")[1] for x in engine if x.startswith(f + ":"))})'
     for f in sorted(set(x.split(':')[0] for x in engine))])

# 4. JWS verifiers: functions that verify a JWS signature themselves.
verifiers = [f'{n}:{fn}' for n in stripped for fn, _p, _s, _j, body in fns[n]
             if re.search(r'\b(cjose_jws_verify|EVP_DigestVerify|EVP_DigestVerifyFinal)\s*\(', '\n'.join(body))]
row('JWS verifiers (functions calling cjose_jws_verify or EVP_DigestVerify)', len(verifiers), verifiers)

# 5. base64url copies: files with a function of their own that encodes or
# decodes base64url -- the alphabet written out, or base64 turned into it.
ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'
b64 = {}
for n, src in sources.items():
    for fn, _p, _s, _j, body in raw_fns[n]:
        text = '\n'.join(body)
        if ALPHABET in text or re.search(r"'\+'\s*\?\s*'-'", text):
            b64.setdefault(n, []).append(fn)
row('base64url copies (files with their own coder)', len(b64), [f'{n}: {", ".join(f)}' for n, f in sorted(b64.items())])

# 6. Parameters looked up by string in handlers.
fg = {n: len(re.findall(r'\bform_get\(&req->params', stripped[n])) for n in sources}
in_handlers = sum(fg[n] for n in handlers)
side = {n: fg[n] for n in http_side if fg.get(n)}
row('form_get(&req->params in handlers', in_handlers,
    [f'{n}: {fg[n]}' for n in handlers if fg[n]] +
    [f'(the HTTP side, not counted: {", ".join(f"{n} {c}" for n, c in side.items())})'] if side else [])

# 7. Long functions.
row('functions over 60 lines', len(mid_fns), [f'{n:4d} {f}' for n, f in sorted(mid_fns, reverse=True)])
row('functions over 100 lines', len(long_fns), [f'{n:4d} {f}' for n, f in sorted(long_fns, reverse=True)])

# 8. duplicates.
row('`duplicates --repo server` pairs', 'n/a (duplicates is not on PATH)' if pairs is None
    else f'{pairs} ({substantive} not marked boilerplate)')

# 9. Circles of files that use each other's names.  A file uses a name of
# another when it names a function or variable that a header declares and the
# other file defines (not a name it defines itself, not a struct member, not a
# struct, union or enum tag: `struct store_stmt` is a type, whatever function
# shares its name), or a static inline function of the other's header (X.h, or
# X_priv.h for X's family).  Each strongly connected group of more than one
# file is a circle.
def module(path):
    stem = os.path.basename(path).rsplit('.', 1)[0]
    return stem[:-5] if stem.endswith('_priv') else stem


headers = glob.glob(os.path.join(ROOT, 'include', '*.h')) + glob.glob(os.path.join(SERVER, '*.h'))
declared, owner = set(), {}
for h in headers:
    s = strip(read(h))
    declared.update(re.findall(r'\b([A-Za-z_]\w*)\s*\(', s))
    declared.update(m.group(1) for m in re.finditer(r'^extern\b[^;]*?\b([A-Za-z_]\w*)\s*(?:\[[^\]]*\])?\s*;', s, re.M))
    for m in re.finditer(r'^static inline\b[^{;]*?\b([A-Za-z_]\w*)\s*\(', s, re.M):
        owner.setdefault(m.group(1), set()).add(module(h))
for n, s in stripped.items():
    for fn, _p, static, _j, _b in fns[n]:
        if not static and fn in declared:
            owner.setdefault(fn, set()).add(module(n))
    for m in re.finditer(r'^(?!static\b)(?:const\s+)?[A-Za-z_][\w ]*?[\s*]([A-Za-z_]\w*)\s*(?:\[[^\]]*\])?\s*=', s, re.M):
        if m.group(1) in declared:
            owner.setdefault(m.group(1), set()).add(module(n))
uses = {}
for n, s in stripped.items():
    a = module(n)
    own = set(re.findall(r'^static\b[^;=]*?\b([A-Za-z_]\w*)\s*\(', s, re.M))
    s = re.sub(r'\b(?:struct|union|enum)\s+[A-Za-z_]\w*', ' ', s)   # tags are no use of a name
    for ident in set(re.findall(r'(?<![.>\w])[A-Za-z_]\w*\b', s)) - own:
        for b in owner.get(ident, ()):
            if b != a:
                uses.setdefault(a, {}).setdefault(b, set()).add(ident)


def circles(graph):
    index, low, stack, on, out = {}, {}, [], set(), []
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out, key=lambda c: (len(c), c))


circ = circles(uses)
details = []
for c in circ:
    details.append('/'.join(c))
    for a in c:
        for b in c:
            if b in uses.get(a, {}):
                names = sorted(uses[a][b])
                details.append(f'    {a} -> {b}: {", ".join(names[:4])}{" ..." if len(names) > 4 else ""}')
row('circles of files that use each other\'s names', len(circ), details)
# The same with edges only from #include lines (A includes X.h or X_priv.h of B).
inc = {}
for p in list(glob.glob(os.path.join(SERVER, '*.c'))) + headers:
    a = module(p)
    for h in re.findall(r'^\s*#\s*include\s+"([^"]+)"', read(p), re.M):
        b = module(h)
        if b != a and (os.path.exists(os.path.join(ROOT, 'include', h)) or os.path.exists(os.path.join(SERVER, h))):
            inc.setdefault(a, set()).add(b)
inc_circ = circles(inc)
row('circles of #include lines alone (A includes B\'s header)', len(inc_circ), ['/'.join(c) for c in inc_circ])

# --- output --------------------------------------------------------------------
print(f'duplicate pairs (duplicates --repo server): {pairs if pairs is not None else "n/a"}')
print(f'functions over 100 lines: {len(long_fns)}')
for n, f in sorted(long_fns, reverse=True):
    print(f'  {n:4d} {f}')
print(f'functions with more than 6 parameters: {len(many_params)}')
if VERBOSE:
    for n, f in sorted(many_params, reverse=True):
        print(f'  {n:4d} {f}')
print(f'files over 1,000 lines: {len(big_files)}')
for n, f in sorted(big_files, reverse=True):
    print(f'  {n:5d} {f}')
print()
print('issue 29, "Measured today":')
for what, figure, det in rows:
    print(f'  {what}: {figure}')
    if VERBOSE or what.startswith('circles'):
        for d in det:
            print(f'      {d}')
