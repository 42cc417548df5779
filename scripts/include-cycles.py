#!/usr/bin/env python3
"""include-cycles.py -- the circles of server/ files that include each other's
names (#29).  A module is a header X.h (include/ or server/, and X_priv.h) with
server/X.c and every other .c file without a header of its own that defines a
function X.h declares (router.c implements http.h; consent_block.c, consent.h).
A file "includes a name" of module B when it includes, directly or through the
headers it includes, a header declaring a name B owns, and uses that name: a
function is owned by the module of the .c file that defines it; a type, macro,
enum constant, variable or static inline function by the header's module.
Prints every circle (a strongly connected set of two or more modules, with the
names that tie it); exit status 1 when there is one.  -v prints every edge."""
import glob, os, re, sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
KEYWORDS = set('''auto break case char const continue default do double else enum extern
float for goto if inline int long register restrict return short signed sizeof static
struct switch typedef union unsigned void volatile while bool true false NULL'''.split())


def strip(text):
    """The text without comments, string and character literals."""
    text = re.sub(r'/\*.*?\*/', ' ', text, flags=re.S)
    text = re.sub(r'//[^\n]*', ' ', text)
    text = re.sub(r'"(\\.|[^"\\\n])*"', '""', text)
    return re.sub(r"'(\\.|[^'\\\n])*'", "''", text)


def module_of(path):
    """server/X.c, include/X.h, server/X_priv.h -> X (store_pg.h -> store_pg)."""
    b = os.path.basename(path)
    b = re.sub(r'\.[ch]$', '', b)
    return re.sub(r'_priv$', '', b)


files = sorted(glob.glob(os.path.join(root, 'server', '*.c')) +
               glob.glob(os.path.join(root, 'server', '*.h')) +
               glob.glob(os.path.join(root, 'include', '*.h')))
text = {f: strip(open(f, encoding='utf-8').read()) for f in files}
by_name = {os.path.basename(f): f for f in files if f.endswith('.h')}
includes = {f: [by_name[h] for h in re.findall(r'^\s*#\s*include\s+"([^"]+)"',
                                                 open(f, encoding='utf-8').read(), re.M)
                if h in by_name] for f in files}

# Functions defined (not static) in each .c: "name(" in a line at column 0
# whose body opens with "{" at column 0 (docs/style.md's layout).
defined_in = {}
for f in files:
    if not f.endswith('.c'):
        continue
    lines = text[f].split('\n')
    for i, line in enumerate(lines):
        if line != '{':
            continue
        j = i - 1
        while j > 0 and not re.match(r'^[A-Za-z_]', lines[j]):
            j -= 1
        sig = ' '.join(lines[j:i])
        if sig.startswith('static'):
            continue
        m = re.search(r'\b([A-Za-z_]\w*)\s*\(', sig)
        if m:
            defined_in.setdefault(m.group(1), module_of(f))

# A .c file without a header of its own belongs to the module whose header
# declares the functions it defines (the one declaring most of them).
headers_named = {module_of(f) for f in files if f.endswith('.h')}
declared_fns = {}
for f in files:
    if f.endswith('.h'):
        for m in re.finditer(r'^[A-Za-z_][^;{}#]*?\b([A-Za-z_]\w*)\s*\(', text[f], re.M):
            declared_fns.setdefault(m.group(1), module_of(f))
part_of = {}
for f in files:
    own = module_of(f)
    if not f.endswith('.c') or own in headers_named:
        continue
    votes = {}
    for fn, mod in defined_in.items():
        if mod == own and fn in declared_fns:
            votes[declared_fns[fn]] = votes.get(declared_fns[fn], 0) + 1
    if votes:
        part_of[own] = max(sorted(votes), key=lambda k: votes[k])
module_of_plain = module_of


def module_of(path):  # noqa: F811 -- the parts join their header's module
    m = module_of_plain(path)
    return part_of.get(m, m)


defined_in = {fn: part_of.get(m, m) for fn, m in defined_in.items()}

# Names each header declares: prototypes, tags, typedefs, macros, enum
# constants, variables.  A function's owner is its defining module.
declares = {}
for f in files:
    if not f.endswith('.h'):
        continue
    t, names = text[f], {}
    own = module_of(f)
    for n in re.findall(r'^\s*#\s*define\s+(\w+)', t, re.M):
        names[n] = own
    for n in re.findall(r'\b(?:struct|enum|union)\s+(\w+)\s*\{', t):
        names[n] = own
    for body in re.findall(r'\benum\b[^{;]*\{([^}]*)\}', t):
        for n in re.findall(r'(?:^|,)\s*([A-Za-z_]\w*)', body):
            names[n] = own
    for n in re.findall(r'\btypedef\b[^;]*?\b(\w+)\s*(?:\)\s*\([^;]*\))?\s*;', t):
        names[n] = own
    for n in re.findall(r'\btypedef\b[^;(]*\(\s*\*\s*(\w+)\s*\)', t):
        names[n] = own
    for n in re.findall(r'^\s*extern\b[^;(]*?\b(\w+)\s*(?:\[[^\]]*\])?\s*;', t, re.M):
        names[n] = own
    # Prototypes and inline definitions at top level (depth 0 of braces).
    depth, top = 0, []
    for ch in t:
        if ch == '{':
            depth += 1
            top.append(' { ')
        elif ch == '}':
            depth -= 1
        elif depth == 0:
            top.append(ch)
    flat = ''.join(top)
    for stmt in re.split(r'[;]|\{ ', flat):
        if re.search(r'^\s*#', stmt, re.M):
            stmt = '\n'.join(l for l in stmt.split('\n') if not l.lstrip().startswith('#'))
        m = re.match(r'\s*(?:static\s+inline\s+)?[A-Za-z_][\w\s\*]*?\b([A-Za-z_]\w*)\s*\(', stmt)
        if m and m.group(1) not in KEYWORDS and 'typedef' not in stmt:
            inline = re.match(r'\s*static\s+inline\b', stmt)
            names[m.group(1)] = own if inline else defined_in.get(m.group(1), own)
    declares[f] = names


def seen(f, acc=None):
    """The headers f includes, directly or through them."""
    acc = set() if acc is None else acc
    for h in includes[f]:
        if h not in acc:
            acc.add(h)
            seen(h, acc)
    return acc


edges = {}
for f in files:
    a = module_of(f)
    used = set(re.findall(r'\b[A-Za-z_]\w*\b', text[f])) - KEYWORDS
    # A file's own statics shadow a header's name of the same spelling.
    local = set(re.findall(r'^static\b[^;{=]*?\b(\w+)\s*\(', text[f], re.M))
    for h in seen(f):
        for n, b in declares[h].items():
            if b != a and n in used and n not in local:
                edges.setdefault(a, {}).setdefault(b, set()).add(f'{os.path.basename(f)}:{n}')

# Tarjan's strongly connected components over the modules.
index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]
sys.setrecursionlimit(10000)


def visit(v):
    index[v] = low[v] = counter[0]
    counter[0] += 1
    stack.append(v)
    on.add(v)
    for w in edges.get(v, {}):
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
            sccs.append(sorted(comp))


for v in sorted({module_of(f) for f in files}):
    if v not in index:
        visit(v)

if '-v' in sys.argv:
    for a in sorted(edges):
        for b in sorted(edges[a]):
            print(f"{a} -> {b}: {', '.join(sorted(edges[a][b]) if '-vv' in sys.argv else sorted(edges[a][b])[:4])}")
# --known "a/b/c" ...: circles not broken yet, which do not fail (lint.sh
# names them; each comes off the list when it is broken).
known = set()
if '--known' in sys.argv:
    known = {'/'.join(sorted(k.split('/'))) for k in sys.argv[sys.argv.index('--known') + 1:]}
print(f'circles of files that include each other\'s names: {len(sccs)}')
new_circles = 0
for comp in sorted(sccs):
    is_known = '/'.join(comp) in known
    new_circles += not is_known
    print('  ' + ' / '.join(comp) + (' (known, not broken yet)' if is_known else ''))
    for a in comp:
        for b in sorted(edges.get(a, {})):
            if b in comp:
                print(f'    {a} -> {b}: {", ".join(sorted(edges[a][b])[:3])}')
stale = known - {'/'.join(c) for c in sccs}
for k in sorted(stale):
    print(f'  {k}: broken now; take it off the known list')
sys.exit(1 if new_circles or stale else 0)
