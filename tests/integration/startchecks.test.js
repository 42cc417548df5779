// `consentd -n` refuses what the start refuses, and `consentd keygen` makes the
// master key (#14.11): a missing, short or malformed master key, one that group
// or others may read, a directory where the key should be, a database or log
// that could not be created -- each said in the start's own words, by -n and by
// the start alike; keygen writes 32 random bytes with mode 0600 and never
// overwrites.  The real binary, real files; no server needs to answer.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync,
} from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { consentdBin, toIni, baseConfig } from '../lib/consentd.js';

const run = (args, env = {}) => spawnSync(consentdBin, args, {
  encoding: 'utf8', timeout: 15000, env: { ...process.env, ASAN_OPTIONS: 'detect_leaks=1', ...env },
});

// A config in a fresh directory; returns { dir, cfgPath, key } (the key file not made).
function setup(over = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'consentd-checks-'));
  const cfg = baseConfig({ port: 8080, dir, issuer: 'http://127.0.0.1:9' });
  for (const [k, v] of Object.entries(over)) cfg[k] = { ...cfg[k], ...v };
  const cfgPath = join(dir, 'config.ini');
  writeFileSync(cfgPath, toIni(cfg));
  return { dir, cfgPath, key: cfg.keys.master_key_file, cfg };
}

// -n and the start both refuse, and both say want (a RegExp) on stderr.
function bothRefuse(s, want, what) {
  const n = run(['-n', '-c', s.cfgPath]);
  assert.equal(n.status, 1, `${what}: -n exit\n${n.stderr}`);
  assert.match(n.stderr, want, `${what}: -n says why`);
  assert.match(n.stderr, /problem.* above: consentd would refuse to start/, `${what}: -n sums up`);
  assert.doesNotMatch(n.stdout, /configuration OK/);
  const start = run(['-c', s.cfgPath]);
  assert.notEqual(start.status, 0, `${what}: the start refuses too`);
  assert.match(start.stderr, want, `${what}: the start says the same`);
}

test('keygen: 32 random bytes, mode 0600, the key id printed; never overwrites; -c uses [keys] master_key_file', () => {
  const s = setup();
  try {
    const g = run(['keygen', s.key]);
    assert.equal(g.status, 0, g.stderr);
    assert.match(g.stdout, new RegExp(`created ${s.key.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} \\(32 random bytes, mode 0600\\); master key id [0-9a-f]{16}`));
    const st = statSync(s.key);
    assert.equal(st.mode & 0o777, 0o600);
    assert.equal(st.size, 32);
    const bytes = readFileSync(s.key);
    assert.doesNotMatch(g.stdout + g.stderr, new RegExp(bytes.toString('hex')), 'the key is never printed');
    assert.doesNotMatch(g.stdout + g.stderr, new RegExp(bytes.toString('base64').replace(/[+/=]/g, '.')));
    // A second run refuses and leaves the key alone.
    const again = run(['keygen', s.key]);
    assert.equal(again.status, 1);
    assert.match(again.stderr, /exists; not overwritten/);
    assert.deepEqual(readFileSync(s.key), bytes);
    // The key it made is one the start accepts: -n passes.
    const n = run(['-n', '-c', s.cfgPath]);
    assert.equal(n.status, 0, n.stderr);
    assert.match(n.stdout, /configuration OK/);
    // Two keys differ.
    const other = join(s.dir, 'other.key');
    assert.equal(run(['keygen', other]).status, 0);
    assert.notDeepEqual(readFileSync(other), bytes);
    // -c CONFIG: at that config's master_key_file.
    rmSync(s.key);
    const c = run(['keygen', '-c', s.cfgPath]);
    assert.equal(c.status, 0, c.stderr);
    assert.equal(statSync(s.key).mode & 0o777, 0o600);
    // Usage and failures.
    assert.equal(run(['keygen', 'a', 'b']).status, 2);
    assert.equal(run(['keygen', s.key, '-c', s.cfgPath]).status, 2);
    assert.equal(run(['keygen', '--bogus']).status, 2);
    const h = run(['keygen', '--help']);
    assert.equal(h.status, 0);
    assert.match(h.stdout, /usage: consentd keygen/);
    const nodir = run(['keygen', join(s.dir, 'no', 'such', 'dir', 'master.key')]);
    assert.equal(nodir.status, 1);
    assert.match(nodir.stderr, /cannot create .*master\.key: the directory .*no\/such\/dir does not exist; create it first/);
    assert.match(run(['--help']).stdout, /consentd keygen/);
  } finally { rmSync(s.dir, { recursive: true, force: true }); }
});

test('-n and the start refuse a missing, short or malformed master key in the same words', () => {
  const s = setup();
  try {
    bothRefuse(s, /cannot open master key file .*master\.key: No such file or directory \(create one with `consentd keygen FILE`\)/, 'missing');
    writeFileSync(s.key, randomBytes(16), { mode: 0o600 });
    bothRefuse(s, /master key file .*master\.key holds 16 bytes: neither 32 raw bytes nor the Base64 of 32 bytes/, 'short');
    writeFileSync(s.key, '', { mode: 0o600 });
    bothRefuse(s, /holds 0 bytes/, 'empty');
    writeFileSync(s.key, `${randomBytes(24).toString('base64')}\n`, { mode: 0o600 });
    bothRefuse(s, /holds 33 bytes: neither 32 raw bytes nor the Base64 of 32 bytes/, 'Base64 of 24 bytes');
    writeFileSync(s.key, randomBytes(300), { mode: 0o600 });
    bothRefuse(s, /master key file .* is too long for a key/, 'too long');
    rmSync(s.key);
    mkdirSync(s.key);
    bothRefuse(s, /master key file .*master\.key is not a regular file/, 'a directory');
    rmSync(s.key, { recursive: true });
    // The Base64 form of 32 bytes is a key (the file, or the environment).
    writeFileSync(s.key, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600 });
    assert.equal(run(['-n', '-c', s.cfgPath]).status, 0);
    rmSync(s.key);
    const env = run(['-n', '-c', s.cfgPath], { CONSENTD_KEYS_MASTER_KEY: randomBytes(32).toString('base64') });
    assert.equal(env.status, 0, env.stderr);
  } finally { rmSync(s.dir, { recursive: true, force: true }); }
});

test('-n and the start refuse a master key group or others may read', () => {
  const s = setup();
  try {
    assert.equal(run(['keygen', s.key]).status, 0);
    for (const mode of [0o640, 0o604, 0o644, 0o660, 0o700 | 0o004]) {
      chmodSync(s.key, mode);
      bothRefuse(s, new RegExp(`master key file .*master\\.key is readable by group or others \\(mode ${mode.toString(8).padStart(3, '0')}\\); chmod 600 it`),
        `mode ${mode.toString(8)}`);
    }
    chmodSync(s.key, 0o400);
    const ok = run(['-n', '-c', s.cfgPath]);
    assert.equal(ok.status, 0, `0400 is fine: ${ok.stderr}`);
  } finally { rmSync(s.dir, { recursive: true, force: true }); }
});

test('-n refuses a database or log the start could not create, and names each problem', () => {
  const base = mkdtempSync(join(tmpdir(), 'consentd-checks-'));
  const s = setup({
    database: { path: join(base, 'no-such-dir', 'consentd.db') },
    server: { log: join(base, 'no-log-dir', 'consentd.log') },
  });
  try {
    assert.equal(run(['keygen', s.key]).status, 0);
    const n = run(['-n', '-c', s.cfgPath]);
    assert.equal(n.status, 1, n.stderr);
    assert.match(n.stderr, /database .*no-such-dir\/consentd\.db: the directory .*no-such-dir does not exist/);
    assert.match(n.stderr, /log .*no-log-dir\/consentd\.log: the directory .*no-log-dir does not exist/);
    assert.match(n.stderr, /2 problems above: consentd would refuse to start/);
    const start = run(['-c', s.cfgPath]);
    assert.notEqual(start.status, 0, 'the start refuses as well');
    // With both directories made, -n passes and creates nothing.
    mkdirSync(join(base, 'no-such-dir'));
    mkdirSync(join(base, 'no-log-dir'));
    const ok = run(['-n', '-c', s.cfgPath]);
    assert.equal(ok.status, 0, ok.stderr);
    assert.throws(() => statSync(join(base, 'no-such-dir', 'consentd.db')), 'no database made by -n');
    assert.throws(() => statSync(join(base, 'no-log-dir', 'consentd.log')), 'no log made by -n');
  } finally {
    rmSync(s.dir, { recursive: true, force: true });
    rmSync(base, { recursive: true, force: true });
  }
});
