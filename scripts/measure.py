#!/usr/bin/env python3
"""measure.py -- the layering figures issue 13 reports: duplicate pairs (from
`duplicates`, when it is on PATH), functions over 100 lines, functions taking
more than 6 parameters, and files over 1,000 lines, for server/.  A function is
a definition whose body opens with "{" in column 0 (docs/style.md "Layout and layers")."""
import glob, os, re, shutil, subprocess, sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'server')
long_fns, many_params, big_files = [], [], []
for path in sorted(glob.glob(os.path.join(root, '*.c'))):
    lines = open(path, encoding='utf-8').read().split('\n')
    name = os.path.basename(path)
    if len(lines) - 1 > 1000:
        big_files.append((len(lines) - 1, name))
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
                fn, params = m.group(1), m.group(2)
                depth, n = 0, (0 if params.strip() in ('', 'void') else 1)
                for ch in params:
                    depth += ch == '('
                    depth -= ch == ')'
                    n += ch == ',' and depth == 0
                body = k - i - 1
                if body > 100:
                    long_fns.append((body, f'{name}:{fn}'))
                if n > 6:
                    many_params.append((n, f'{name}:{fn}'))
            i = k
        i += 1

pairs = None
if shutil.which('duplicates'):
    out = subprocess.run(['duplicates', '--repo', root], capture_output=True, text=True).stdout
    listed = len(re.findall(r'^D\d+ ', out, re.M))
    more = re.search(r'\(\+(\d+) more pairs\)', out)
    pairs = listed + (int(more.group(1)) if more else 0)
print(f'duplicate pairs (duplicates --repo server): {pairs if pairs is not None else "n/a"}')
print(f'functions over 100 lines: {len(long_fns)}')
for n, f in sorted(long_fns, reverse=True):
    print(f'  {n:4d} {f}')
print(f'functions with more than 6 parameters: {len(many_params)}')
if '-v' in sys.argv:
    for n, f in sorted(many_params, reverse=True):
        print(f'  {n:4d} {f}')
print(f'files over 1,000 lines: {len(big_files)}')
for n, f in sorted(big_files, reverse=True):
    print(f'  {n:5d} {f}')
