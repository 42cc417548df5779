#!/usr/bin/env python3
"""pg-sql-check.py -- does every statement of server/store*.c run on both
backends?  Starts a throw-away PostgreSQL 15 (its own temporary directory and
socket, removed at exit), applies migrations/pg/ the way the driver does (each
file as one multi-statement query inside BEGIN/COMMIT), builds a SQLite file
from migrations/ with the sqlite3 CLI, compares the two schemas (but for
PG_ONLY_COLUMNS and PG_ONLY_INDEXES), and then, for
every `static const char SQL_...[]`:
  - SQLite: EXPLAIN with the sqlite3 CLI (it compiles);
  - PostgreSQL: PREPARE with ?N written $N and each parameter typed as its C
    call sites bind it (SV_INT int8, SV_TEXT text, SV_BLOB* bytea), then
    EXECUTE with dummy values inside a rolled-back transaction (a constraint
    violation from the dummies is fine; any other run-time error is not);
  - and for a statement that reads the audit, its SQLite plan: a walk in seq
    order or the indexes named in AUDIT_INDEXES, never a scan of the whole table.
Statements known to need a per-dialect form are listed in PG_ONLY with the
text the PostgreSQL driver should use; that text is checked instead.  The
SQLite engine's own statements (store_sqlite.c) are checked on SQLite only.
Nothing here edits the tree.  Exit status 0 when all is well.

Usage: scripts/pg-sql-check.py [-v]      (PG_BIN overrides the server's bin dir)
Needs: cc (for the preprocessor), pkg-config, sqlite3, PostgreSQL 15 server
binaries; run as root (the server runs as user postgres) or as a normal user.
"""
import atexit
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
PG_BIN = os.environ.get('PG_BIN', '/usr/lib/postgresql/15/bin')
VERBOSE = '-v' in sys.argv[1:]

PG_TYPE = {'SV_INT': 'int8', 'SV_TEXT': 'text', 'SV_BLOB': 'bytea', 'SV_BLOB_OR_NULL': 'bytea'}
DUMMY = {'int8': '1', 'text': "'1'", 'bytea': "'\\x00'::bytea"}

# Statements with no text that both engines accept: the PostgreSQL driver
# uses the form given here (checked like the others).  Keyed by file:name.
PG_ONLY = {
}
# The SQLite engine's own statements (its transactions, savepoints and
# schema_version; BEGIN IMMEDIATE has no PostgreSQL form) run on SQLite only:
# store_pg.c sends its own.  They are checked on SQLite alone.
SQLITE_ONLY_FILES = {'store_sqlite.c'}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


# --- a private PostgreSQL --------------------------------------------------

class Postgres:
    """initdb + pg_ctl in a fresh temporary directory; stop() removes it all."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix='consentd-pgcheck-')
        self.data = os.path.join(self.dir, 'data')
        self.as_root = os.geteuid() == 0
        self.pid = None
        if self.as_root:
            shutil.chown(self.dir, user='postgres', group='postgres')
        atexit.register(self.stop)
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, lambda *_: sys.exit(130))

    def _pg(self, tool, *args):
        cmd = [os.path.join(PG_BIN, tool), *args]
        if self.as_root:
            cmd = ['runuser', '-u', 'postgres', '--', *cmd]
        r = run(cmd)
        if r.returncode != 0:
            raise RuntimeError(f'{tool} failed: {r.stderr.strip() or r.stdout.strip()}')
        return r

    def start(self):
        self._pg('initdb', '-D', self.data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8',
                 '--locale=C')
        opts = f"-c listen_addresses='' -c unix_socket_directories={self.dir} -c fsync=on"
        self._pg('pg_ctl', '-D', self.data, '-o', opts, '-l', os.path.join(self.dir, 'log'),
                 'start', '-w')
        with open(os.path.join(self.data, 'postmaster.pid')) as f:
            self.pid = int(f.readline())
        self.url = f'postgresql:///postgres?host={self.dir}&user=postgres'
        self.psql('CREATE DATABASE consentd')
        self.url = f'postgresql:///consentd?host={self.dir}&user=postgres'

    def psql(self, *commands, verbose=False):
        """Runs each command as its own simple query; (ok, stderr)."""
        cmd = ['psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-d', self.url]
        if verbose:
            cmd += ['-v', 'VERBOSITY=verbose']
        for c in commands:
            cmd += ['-c', c]
        r = run(cmd)
        return r.returncode == 0, r.stderr.strip(), r.stdout

    def stop(self):
        if self.dir is None:
            return
        if os.path.exists(os.path.join(self.data, 'postmaster.pid')):
            try:
                self._pg('pg_ctl', '-D', self.data, 'stop', '-m', 'fast', '-w')
            except RuntimeError:
                pass
        if self.pid is not None:
            try:
                os.kill(self.pid, 0)
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir = None


# --- the statements and their parameter types ------------------------------

def c_strings(text):
    return ''.join(m.group(1) for m in re.finditer(r'"((?:[^"\\]|\\.)*)"', text))


def statements():
    """[(file, name, sql)] from the preprocessed sources (macros expanded)."""
    flags = run(['pkg-config', '--cflags', 'libmicrohttpd', 'openssl', 'cjose', 'libcurl',
                 'sqlite3', 'libpq', 'jansson', 'inih']).stdout.split()
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, 'server', 'store*.c'))):
        r = run(['cc', '-E', '-P', '-std=c17', '-D_GNU_SOURCE', '-Iinclude', '-Ibuild', *flags,
                 path], cwd=ROOT)
        if r.returncode != 0:
            sys.exit(f'pg-sql-check: cc -E {path}: {r.stderr}')
        for m in re.finditer(r'static const char (SQL_\w+)\[\]\s*=\s*((?:\s*"(?:[^"\\]|\\.)*")+)\s*;',
                             r.stdout):
            out.append((os.path.basename(path), m.group(1), c_strings(m.group(2))))
    # Cross-check against the raw text: every constant must have been found.
    raw = sum(len(re.findall(r'static const char SQL_\w+\[\]', open(p).read()))
              for p in glob.glob(os.path.join(ROOT, 'server', 'store*.c')))
    if raw != len(out):
        sys.exit(f'pg-sql-check: found {len(out)} statements, the sources declare {raw}')
    return out


def split_args(s):
    """Top-level comma split of a C argument list."""
    parts, depth, cur = [], 0, ''
    for ch in s:
        if ch in '([{':
            depth += 1
        elif ch in ')]}':
            depth -= 1
        if ch == ',' and depth == 0:
            parts.append(cur.strip())
            cur = ''
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def vals_at(src, i):
    """The SV_ kinds of the STORE_VALS( ... ) starting at src[i]."""
    j = src.index('(', i) + 1
    depth, k = 1, j
    while depth:
        depth += {'(': 1, ')': -1}.get(src[k], 0)
        k += 1
    kinds = []
    for a in split_args(src[j:k - 1]):
        m = re.match(r'(SV_BLOB_OR_NULL|SV_BLOB|SV_TEXT|SV_INT)\s*\(', a)
        if not m:
            sys.exit(f'pg-sql-check: cannot type the argument {a!r}')
        kinds.append(PG_TYPE[m.group(1)])
    return kinds


def functions(src):
    """(name, params text, body) of each top-level function (body opens with
    "{" in column 0, docs/style.md "Layout and layers")."""
    for m in re.finditer(r'^(?:[A-Za-z_][^\n;{}]*?)\b(\w+)\s*\(([^;{}]*?)\)\s*\n\{\n(.*?)\n\}\n',
                         src, re.S | re.M):
        yield m.group(1), m.group(2), m.group(3)


def param_types():
    """{file:name: [pg type of ?1, ?2, ...]} from the call sites: in each
    function, the SQL constants named since the last STORE_VALS take that
    STORE_VALS' kinds; a helper that takes `const char *sql` and binds it
    lends its kinds to the constants its callers pass it."""
    types, conflicts = {}, []

    def note(key, kinds):
        if key in types and types[key] != kinds:
            conflicts.append(f'{key}: {types[key]} vs {kinds}')
        types[key] = kinds

    for path in sorted(glob.glob(os.path.join(ROOT, 'server', 'store*.c'))):
        f = os.path.basename(path)
        src = open(path).read()
        helpers = {}
        funcs = list(functions(src))
        for name, params, body in funcs:
            if re.search(r'const char \*sql\b', params) and 'STORE_VALS' in body:
                first = re.search(r'STORE_VALS\s*\(', body)
                if not re.search(r'\bSQL_\w+', body[:first.start()]):
                    helpers[name] = vals_at(body, first.start())
        for name, params, body in funcs:
            pending = []
            for m in re.finditer(r'\bSTORE_VALS\s*\(|\b(SQL_\w+)\b|\b(\w+)\s*\(\s*c\s*,\s*(SQL_\w+)',
                                 body):
                if m.group(2) in helpers:
                    note(f'{f}:{m.group(3)}', helpers[m.group(2)])
                elif m.group(3):
                    pending.append(m.group(3))
                elif m.group(1):
                    pending.append(m.group(1))
                elif m.group(0).startswith('STORE_VALS'):
                    kinds = vals_at(body, m.start())
                    for p in pending:
                        note(f'{f}:{p}', kinds)
                    pending = []
    if conflicts:
        sys.exit('pg-sql-check: call sites bind differently:\n  ' + '\n  '.join(conflicts))
    return types


def to_pg(sql):
    # Outside string literals only (the odd pieces of a split on quotes;
    # '' inside a literal splits into an empty outside piece, which is fine).
    pieces = sql.split("'")
    if any('?' in p for p in pieces[1::2]):
        raise ValueError('a ? inside a string literal')
    pieces[0::2] = [re.sub(r'\?(\d+)', r'$\1', p) for p in pieces[0::2]]
    return "'".join(pieces)


def max_param(sql):
    return max((int(n) for n in re.findall(r'\?(\d+)', sql)), default=0)


# --- the two schemas -------------------------------------------------------

def sqlite_build(path):
    with open(path + '.sql', 'w') as out:
        out.write('CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, '
                  'applied_at INTEGER NOT NULL);\n')
        for m in sorted(glob.glob(os.path.join(ROOT, 'migrations', '*.sql'))):
            out.write(f'BEGIN;\n{open(m).read()}\n;INSERT INTO schema_version VALUES '
                      f'({int(os.path.basename(m)[:4])}, 0);\nCOMMIT;\n')
    r = run(['sqlite3', '-bail', path], stdin=open(path + '.sql'))
    if r.returncode != 0:
        sys.exit(f'pg-sql-check: SQLite migrations: {r.stderr}')


def pg_migrate(pg):
    ok, err, _ = pg.psql('CREATE TABLE IF NOT EXISTS schema_version (version BIGINT PRIMARY KEY, '
                         'applied_at BIGINT NOT NULL)')
    if not ok:
        sys.exit(f'pg-sql-check: schema_version: {err}')
    sqlite_names = [os.path.basename(p) for p in glob.glob(os.path.join(ROOT, 'migrations', '*.sql'))]
    pg_names = [os.path.basename(p) for p in glob.glob(os.path.join(ROOT, 'migrations', 'pg', '*.sql'))]
    if sorted(sqlite_names) != sorted(pg_names):
        sys.exit(f'pg-sql-check: migrations/ and migrations/pg/ differ: '
                 f'{sorted(set(sqlite_names) ^ set(pg_names))}')
    for name in sorted(pg_names):
        text = open(os.path.join(ROOT, 'migrations', 'pg', name)).read()
        # As the driver: BEGIN, the file as one simple query, the version, COMMIT.
        ok, err, _ = pg.psql('BEGIN', text, f'INSERT INTO schema_version VALUES ({int(name[:4])}, 0)',
                             'COMMIT')
        if not ok:
            sys.exit(f'pg-sql-check: migrations/pg/{name}: {err}')


SQLITE_TYPE = {'INTEGER': 'bigint', 'TEXT': 'text', 'BLOB': 'bytea', 'REAL': 'double precision'}

# The columns and indexes PostgreSQL alone has, on purpose: the audit's xid
# (migration 0030): the inserting transaction, by which the admin API's audit
# listing reads only what no running transaction can still add to (many
# writers number entries before they commit; SQLite's one writer does not).
PG_ONLY_COLUMNS = {('audit', 'xid')}
PG_ONLY_INDEXES = {'audit_xid'}


def norm_default(d):
    if d is None:
        return None
    d = re.sub(r"::[a-z ]+$", '', str(d)).strip()
    d = re.sub(r"^'(-?\d+)'$", r'\1', d)
    d = {"x''": "''", "'\\x'": "''"}.get(d, d)
    return d.strip('()') if re.fullmatch(r'\(-?\d+\)', d) else d


def norm_pred(p):
    """A partial index's WHERE as both engines would print it alike."""
    return re.sub(r'[()\s]|::\w+', '', p).lower()


def schema_diff(db, pg):
    """Differences between the two schemas other than the documented ones."""
    diffs = []

    def sq(sql):
        r = run(['sqlite3', '-json', db, sql])
        return json.loads(r.stdout or '[]')

    def pq(sql):
        ok, err, out = pg.psql(f'SELECT coalesce(json_agg(r_), \'[]\') FROM ({sql}) r_')
        if not ok:
            sys.exit(f'pg-sql-check: {err}')
        return json.loads(out)

    s_tables = {r['name'] for r in sq("SELECT name FROM sqlite_master WHERE type = 'table' "
                                      "AND name NOT LIKE 'sqlite_%'")}
    p_tables = {r['table_name'] for r in pq("SELECT table_name FROM information_schema.tables "
                                            "WHERE table_schema = 'public'")}
    if s_tables != p_tables:
        diffs.append(f'tables: only SQLite {sorted(s_tables - p_tables)}, '
                     f'only PG {sorted(p_tables - s_tables)}')
    for t in sorted(s_tables & p_tables):
        s_cols = {r['name']: r for r in sq(f"SELECT * FROM pragma_table_info('{t}')")}
        p_cols = {r['column_name']: r for r in pq(
            "SELECT column_name, data_type, is_nullable, column_default, is_identity, "
            f"is_generated FROM information_schema.columns WHERE table_name = '{t}'")}
        for c in sorted(set(s_cols) | set(p_cols)):
            s, p = s_cols.get(c), p_cols.get(c)
            if s is None:
                if c == 'rowid' and p['is_identity'] == 'YES':
                    continue           # SQLite's implicit rowid, made explicit
                if (t, c) in PG_ONLY_COLUMNS:
                    continue
                diffs.append(f'{t}.{c}: only in PG')
                continue
            if p is None:
                diffs.append(f'{t}.{c}: only in SQLite')
                continue
            want = SQLITE_TYPE.get(s['type'].upper(), '?' + s['type'])
            if p['data_type'] != want:
                diffs.append(f'{t}.{c}: SQLite {s["type"]}, PG {p["data_type"]}')
            s_null = not s['notnull'] and not s['pk']
            if s_null != (p['is_nullable'] == 'YES'):
                diffs.append(f'{t}.{c}: NULL allowed in SQLite {s_null}, in PG {p["is_nullable"]}')
            if p['is_identity'] == 'YES':
                if not (s['pk'] and s['type'].upper() == 'INTEGER'):
                    diffs.append(f'{t}.{c}: identity in PG, not a rowid alias in SQLite')
            elif norm_default(s['dflt_value']) != norm_default(p['column_default']):
                diffs.append(f'{t}.{c}: default SQLite {s["dflt_value"]}, PG {p["column_default"]}')
        s_idx = {}
        for r in sq(f"SELECT name, \"unique\", partial, origin FROM pragma_index_list('{t}')"):
            cols = [x['name'] for x in sq(f"SELECT name FROM pragma_index_info('{r['name']}') "
                                          "ORDER BY seqno")]
            where = ''
            if r['partial']:
                where = sq(f"SELECT sql FROM sqlite_master WHERE name = '{r['name']}'")[0]['sql']
                where = re.split(r'\bWHERE\b', where, flags=re.I)[1]
            s_idx[(tuple(cols), bool(r['unique']), norm_pred(where))] = r['name']
        p_idx = {}
        for r in pq("SELECT i.relname AS name, x.indisunique AS uniq, "
                    "coalesce(pg_get_expr(x.indpred, x.indrelid), '') AS pred, "
                    "ARRAY(SELECT a.attname FROM unnest(x.indkey) WITH ORDINALITY k(n, o) "
                    "JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.n ORDER BY k.o) "
                    "AS cols FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
                    f"WHERE x.indrelid = '{t}'::regclass"):
            p_idx[(tuple(r['cols']), r['uniq'], norm_pred(r['pred']))] = r['name']
        for k in sorted(set(s_idx) | set(p_idx)):
            if k in s_idx and k in p_idx:
                if not s_idx[k].startswith('sqlite_autoindex') and s_idx[k] != p_idx[k]:
                    diffs.append(f'{t}: index {s_idx[k]} is {p_idx[k]} in PG')
            elif k in p_idx and k[0] == ('rowid',) and not k[1]:
                continue               # the lookup SQLite's table b-tree gives rowid
            elif k in p_idx and k not in s_idx and p_idx[k] in PG_ONLY_INDEXES:
                continue
            else:
                # An INTEGER PRIMARY KEY has no SQLite index (it is the rowid).
                if k in p_idx and k[1] and len(k[0]) == 1 and \
                        s_cols.get(k[0][0], {}).get('pk') and \
                        s_cols[k[0][0]]['type'].upper() == 'INTEGER':
                    continue
                where = 'SQLite' if k in s_idx else 'PG'
                diffs.append(f'{t}: index {s_idx.get(k) or p_idx.get(k)} {k} only in {where}')
        s_sql = sq(f"SELECT sql FROM sqlite_master WHERE name = '{t}'")[0]['sql']
        s_checks = len(re.findall(r'\bCHECK\b', s_sql, re.I))
        p_checks = pq(f"SELECT conname FROM pg_constraint WHERE conrelid = '{t}'::regclass "
                      "AND contype = 'c'")
        if s_checks != len(p_checks):
            diffs.append(f'{t}: {s_checks} CHECK in SQLite, {len(p_checks)} in PG')
        s_fk = sq(f"SELECT \"table\", \"from\", \"to\", on_delete FROM pragma_foreign_key_list('{t}')")
        p_fk = pq("SELECT confrelid::regclass::text AS t, confdeltype AS d, array_length(conkey, 1) AS n "
                  f"FROM pg_constraint WHERE conrelid = '{t}'::regclass AND contype = 'f'")
        if sorted((r['table'], r['on_delete'] == 'CASCADE') for r in s_fk) != \
                sorted((r['t'], r['d'] == 'c') for r in p_fk):
            diffs.append(f'{t}: foreign keys differ: {s_fk} vs {p_fk}')
    return diffs


# --- the check ---------------------------------------------------------------

TX = re.compile(r'^(BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE)\b', re.I)


def pg_tx_check(pg, sql):
    """Transaction control cannot be PREPAREd: run it where it makes sense."""
    word = sql.split()[0].upper()
    if word == 'BEGIN':
        seq = [sql, 'ROLLBACK']
    elif word in ('RELEASE',) or re.match(r'ROLLBACK\s+TO\b', sql, re.I):
        seq = ['BEGIN', 'SAVEPOINT caller', sql, 'ROLLBACK']
    else:                     # COMMIT, ROLLBACK, SAVEPOINT x (a ROLLBACK after them only warns)
        seq = ['BEGIN', sql, 'ROLLBACK']
    ok, err, _ = pg.psql(*seq)
    return ok, err


def pg_check(pg, sql, kinds):
    if TX.match(sql):
        return pg_tx_check(pg, sql)
    decl = f'({", ".join(kinds)})' if kinds else ''
    prep = f'PREPARE s{decl} AS {to_pg(sql)}'
    ok, err, _ = pg.psql(prep)
    if not ok:
        return False, err
    args = f'({", ".join(DUMMY[k] for k in kinds)})' if kinds else ''
    ok, err, _ = pg.psql('BEGIN', prep, f'EXECUTE s{args}', 'ROLLBACK', verbose=True)
    # Class 23: the dummy values broke a constraint, which is the data's doing.
    if not ok and not re.search(r'ERROR:\s+23\d\d\d', err):
        return False, 'EXECUTE: ' + err
    return True, ''


# How the audit's readers find their rows on SQLite (EXPLAIN QUERY PLAN).  The
# audit is the one table that grows by an entry a grant and a proxied call, so
# a reader that scans it gets slower with every request ever served; and its
# secondary indexes are what every entry writes (migration 0029), so each one
# must serve a reader.  A statement reading audit may walk it in seq order
# (its primary key) up to its LIMIT, or use the indexes named here; a
# "SCAN audit" of any other statement fails, as does a plan missing an index
# named for it (dropping the literal "consent_id IS NULL" from
# SQL_CONSENT_EVENTS, for one, loses audit_request's partial index).
AUDIT_WALKS = {'store_admin.c:SQL_AUDIT_DESC', 'store_audit.c:SQL_AUDIT_LAST'}
AUDIT_INDEXES = {
    'store_admin.c:SQL_CONSENT_EVENTS': ['audit_consent', 'audit_request'],
    'store_audit.c:SQL_AUDIT_HEAD': ['audit_chain'],
    'store_audit.c:SQL_CHAIN_HEADS': ['audit_chain'],
}


def audit_plan_check(db, key, sql):
    """'' when the statement reads audit the way it should, else why not."""
    if not re.search(r'\bFROM\s+audit\b', sql, re.I):
        return ''
    r = run(['sqlite3', '-bail', db, 'EXPLAIN QUERY PLAN ' + sql])
    plan = r.stdout
    if r.returncode != 0:
        return r.stderr.strip()
    if re.search(r'\bSCAN audit\b(?! USING INTEGER PRIMARY KEY)', plan) and key not in AUDIT_WALKS:
        return f'scans the whole audit:\n{plan}'
    missing = [i for i in AUDIT_INDEXES.get(key, []) if not re.search(rf'\bINDEX {i}\b', plan)]
    if missing:
        return f'does not use {", ".join(missing)}:\n{plan}'
    return ''


def sqlite_check(db, sql):
    r = run(['sqlite3', '-bail', db, 'EXPLAIN ' + sql])
    return r.returncode == 0, r.stderr.strip()


def sqlite_problems(db, key, sql):
    """The statement on SQLite: it compiles, and (audit_plan_check) reads the
    audit as it should.  Logs each problem; returns how many."""
    ok, err = sqlite_check(db, sql)
    why = audit_plan_check(db, key, sql) if ok else ''
    for problem in ([] if ok else [err]) + ([why] if why else []):
        log(f'FAIL {key} on SQLite: {problem}')
    return (0 if ok else 1) + (1 if why else 0)


def main():
    os.chdir(ROOT)
    stmts = statements()
    types = param_types()
    pg = Postgres()
    pg.start()
    pg_migrate(pg)
    db = os.path.join(pg.dir, 'sqlite.db')
    sqlite_build(db)

    bad = 0
    diffs = schema_diff(db, pg)
    for d in diffs:
        log(f'schema: {d}')
    bad += len(diffs)

    pg_only = []
    # A statement SQL_X_PG beside SQL_X in one file is the code's own pair of
    # dialects (store_stmt_dialect: the engine takes its own): SQL_X_PG runs on PostgreSQL only, and
    # SQL_X on SQLite only.
    names = {(f, name) for f, name, _ in stmts}
    for f, name, sql in stmts:
        key = f'{f}:{name}'
        kinds = types.get(key, [])
        if f in SQLITE_ONLY_FILES:
            bad += sqlite_problems(db, key, sql)
            continue
        if name.endswith('_PG') and (f, name[:-3]) in names:
            kinds = types.get(f'{f}:{name[:-3]}', kinds) if not kinds else kinds
            ok, err = pg_check(pg, sql, kinds)
            if not ok:
                log(f'FAIL {key} on PostgreSQL: {to_pg(sql)}\n    {err}')
                bad += 1
            pg_only.append(key)
            continue
        if (f, name + '_PG') in names:
            bad += sqlite_problems(db, key, sql)
            continue
        if max_param(sql) > len(kinds):
            log(f'FAIL {key}: ?{max_param(sql)} used, call sites bind {len(kinds)}')
            bad += 1
            continue
        bad += sqlite_problems(db, key, sql)
        pg_sql = PG_ONLY.get(key, sql)
        ok, err = pg_check(pg, pg_sql, kinds)
        if key in PG_ONLY:
            pg_only.append(key)
            # The shared text must still fail there, or PG_ONLY is stale.
            if pg_check(pg, sql, kinds)[0]:
                log(f'NOTE {key}: runs on PostgreSQL as it is; drop it from PG_ONLY')
        if not ok:
            log(f'FAIL {key} on PostgreSQL: {to_pg(pg_sql)}\n    {err}')
            bad += 1
        elif VERBOSE:
            log(f'ok   {key} ({", ".join(kinds)})')
    for key in PG_ONLY:
        if key not in pg_only:
            log(f'NOTE {key} in PG_ONLY no longer exists')
    log(f'pg-sql-check: {len(stmts)} statements, {len(pg_only)} with a PostgreSQL-only form '
        f'({", ".join(pg_only)}), {bad} problem(s)')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
