// The documentation against the code (issue 35): every configuration key that docs/*.md,
// README.md, man/consentd.conf.5 and config/consentd.conf.example name exists in that
// section, and every default they state is the default the code has. The code's side is
// `consentd config-keys`, which prints each key as config_section.c's getters read it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { consentdBin } from '../lib/consentd.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
// DOCS_ROOT: check another copy of the documents (how the test is shown to fail).
const DOCS = process.env.DOCS_ROOT || ROOT;

// { 'server listen': { def: '127.0.0.1:8080', required: false }, ... }; named sections as
// agent.NAME, resource.NAME, scope.NAME.SCOPE, action.NAME.ACTION.
function codeKeys() {
  const r = spawnSync(consentdBin, ['config-keys'], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const keys = new Map();
  for (const line of r.stdout.trim().split('\n')) {
    const m = /^\[([^\]]+)\] ([a-z0-9_]+)(?: = (.*)| =| \(required\)| \(obsolete\))$/.exec(line);
    assert.ok(m, `config-keys printed an unexpected line: ${line}`);
    keys.set(`${m[1]} ${m[2]}`, { def: m[3] ?? '', required: line.endsWith('(required)'),
      obsolete: line.endsWith('(obsolete)') });
  }
  return keys;
}
const KEYS = codeKeys();
const SECTIONS = new Set([...KEYS.keys()].map((k) => k.split(' ')[0]));

// [agent.coder] -> agent.NAME, [scope.notes.read] -> scope.NAME.SCOPE; the names, to put
// into a default that names its section (NAME -> coder).
function kindOf(section) {
  const [kind, a, ...b] = section.split('.');
  if (kind === 'agent' || kind === 'resource' || kind === 'client' || kind === 'enterprise') return a ? { sec: `${kind}.NAME`, NAME: a } : null;
  if (kind === 'mcp' && a) return { sec: 'mcp.NAME', NAME: a };
  if (kind === 'scope' || kind === 'action') {
    const last = kind === 'scope' ? 'SCOPE' : 'ACTION';
    return a && b.length ? { sec: `${kind}.NAME.${last}`, NAME: a, [last]: b.join('.') } : null;
  }
  return SECTIONS.has(section) ? { sec: section } : null;
}
const defaultFor = (k, names) => k.def.replace(/\b(NAME|SCOPE|ACTION)\b/g, (w) => names[w] ?? w);
const noDefault = (k) => k.required || k.def === '';

// A default as a document writes it, compared with the code's: units and "s" dropped.
function sameDefault(written, code) {
  const w = written.replace(/[`*]/g, '').trim();
  if (w === code) return true;
  if (/^(empty|none|nothing)$/i.test(w)) return code === '';
  // A default naming its section: the document's placeholder (X, ID, NAME ...) for NAME.
  return /NAME/.test(code) && w.replace(/\b(X|ID|NAME|RESOURCE|AGENT)\b/, 'NAME') === code;
}

function markdownFiles() {
  const docs = readdirSync(join(DOCS, 'docs')).filter((f) => f.endsWith('.md')).map((f) => join('docs', f));
  return ['README.md', ...docs];
}

// Keys named without a section: the one section that has them, if only one does.
const BARE = new Map();
for (const k of KEYS.keys()) {
  const [sec, key] = k.split(' ');
  if (sec.includes('.')) continue;
  BARE.set(key, BARE.has(key) ? null : sec);
}

// What a sentence of Markdown says of a key's default right after naming it:
// "(default 300)", "(default `sub`)", ", default 3600 s", "defaults to 300",
// "by default `/etc/...`", "(65536 by default)", and a bare number in brackets "(16384)".
function statedDefault(after) {
  const m = /^[^`.;]{0,40}?\bdefaults?(?: to| is|:)? (`[^`]+`|[0-9][0-9.]*|[a-z][a-z_-]*)/.exec(after)
    || /^\s*\((`[^`]+`|[0-9][0-9.]*) by default\)/.exec(after)
    || /^\s*\(([0-9][0-9.]*)(?: s)?[,)]/.exec(after.replace(/^\s*\([1-5][0-9][0-9]\b.*/, ''));
  if (!m) return null;
  const v = m[1].replace(/`/g, '');
  if (/^(the|a|an|in|is|of|and|or|when|read|deny|every|it|this)$/.test(v)) return null;
  return v;
}

test('every [section] key the Markdown documents name exists, and each default they state is the code\'s', () => {
  const problems = [];
  let checked = 0;
  let defaults = 0;
  for (const file of markdownFiles()) {
    const text = readFileSync(join(DOCS, file), 'utf8');
    // Paragraphs, so that a bare key can take its section from a mention before it.
    const paras = text.replace(/```[\s\S]*?```/g, '').split(/\n\s*\n/);
    for (const para of paras) {
      const flat = para.replace(/\s*\n\s*/g, ' ');
      let lastSection = null;
      const re = /`\[([A-Za-z][A-Za-z0-9_.:-]*)\](?: ([a-z0-9_]+))?(?: = [^`]*)?`|`([a-z][a-z0-9_]*)`/g;
      for (let m; (m = re.exec(flat));) {
        let sec;
        let key;
        if (m[1] !== undefined) {
          const kind = kindOf(m[1]) || kindOf(m[1].replace(/\.(ID|X|RESOURCE|SCOPE|ACTION)\b/g, '.x'));
          if (!kind) {
            problems.push(`${file}: [${m[1]}] is not a section the code has`);
            continue;
          }
          lastSection = kind.sec;
          if (m[2] === undefined) continue;
          sec = kind.sec;
          key = m[2];
          checked++;
          if (!KEYS.has(`${sec} ${key}`)) {
            problems.push(`${file}: \`[${m[1]}] ${key}\`: no such key in [${sec}]`);
            continue;
          }
        } else {
          key = m[3];
          sec = BARE.get(key);
          if (lastSection && KEYS.has(`${lastSection} ${key}`)) sec = lastSection;
          if (!sec || !KEYS.has(`${sec} ${key}`)) continue;   // a word, not a key
        }
        const stated = statedDefault(flat.slice(m.index + m[0].length));
        if (stated === null) continue;
        const code = KEYS.get(`${sec} ${key}`);
        defaults++;
        if (!sameDefault(stated, code.def))
          problems.push(`${file}: [${sec}] ${key}: the document says the default is ${stated}, the code has ${code.required ? '(required)' : code.def || '(none)'}`);
      }
    }
  }
  assert.deepEqual(problems, [], problems.join('\n'));
  assert.ok(checked > 100, `only ${checked} key mentions found`);
  assert.ok(defaults > 20, `only ${defaults} stated defaults found`);
});

test('config/consentd.conf.example names every key the code has, and each with its default', () => {
  const problems = [];
  const seen = new Set();
  let kind = null;
  let section = null;
  const lines = readFileSync(join(DOCS, 'config', 'consentd.conf.example'), 'utf8').split('\n');
  for (const [i, line] of lines.entries()) {
    const at = `consentd.conf.example:${i + 1}`;
    const s = /^\s*\[([^\]]+)\]/.exec(line);
    if (s) {
      section = s[1];
      kind = kindOf(section);
      if (!kind) problems.push(`${at}: [${section}] is not a section the code has`);
      continue;
    }
    const kv = /^(;\s*)?([a-z][a-z0-9_]*)\s*=\s*(.*?)\s*(?:;(.*))?$/.exec(line);
    if (!kv || !kind || (kv[1] && !/^; [a-z0-9_]+ = /.test(line))) continue;
    const [, commented, key, value, comment = ''] = kv;
    const code = KEYS.get(`${kind.sec} ${key}`);
    if (!code) {
      if (!commented) problems.push(`${at}: ${key}: no such key in [${kind.sec}]`);
      continue;
    }
    seen.add(`${kind.sec} ${key}`);
    const def = defaultFor(code, kind);
    // A value that differs from the default says so: "; ... default: X".
    const said = /\bdefault: ([^;.]+?)(?:\.|;|$)/.exec(comment);
    if (said && !/^(the|none|empty)\b/.test(said[1].trim())) {
      if (!sameDefault(said[1], def)) problems.push(`${at}: ${key}: the comment says the default is ${said[1].trim()}, the code has ${def}`);
      continue;
    }
    const named = kind.NAME !== undefined;
    if (named && !/\bthe default\b/.test(comment)) continue;   // an example's own values
    if (noDefault(code)) continue;
    if (value !== def) problems.push(`${at}: ${key} = ${value}, but the code's default is ${def}`);
  }
  // An obsolete key (accepted with a warning, ignored) is no longer in the example.
  for (const [k, v] of KEYS)
    if (!seen.has(k) && !v.obsolete) problems.push(`the example lacks [${k.replace(' ', '] ')}`);
  assert.deepEqual(problems, [], problems.join('\n'));
});

// Roff to text: the macros' arguments joined (alternating fonts without spaces), escapes out.
function roffText(src) {
  const out = [];
  for (const line of src.split('\n')) {
    if (line.startsWith('.\\"')) continue;
    const m = /^\.([A-Z]{1,2})\s*(.*)$/.exec(line);
    if (!m) { out.push(line); continue; }
    const args = [...m[2].matchAll(/"([^"]*)"|(\S+)/g)].map((a) => a[1] ?? a[2]);
    if (['B', 'I', 'SM'].includes(m[1])) out.push(args.join(' '));
    else if (/^[BIR]{2}$/.test(m[1])) out.push(args.join(''));
    else out.push(`\n.${m[1]} ${args.join(' ')}`);
  }
  return out.join('\n').replace(/\\%|\\&|\\f[BIRP]|\\\|/g, '').replace(/\\-/g, '-')
    .replace(/\\\(dq/g, '"').replace(/\\\(em/g, '-');
}

test('consentd.conf.5: every key it describes exists in its section, and each default it states is the code\'s', () => {
  const page = roffText(readFileSync(join(DOCS, 'man', 'consentd.conf.5'), 'utf8'));
  const problems = [];
  let defaults = 0;
  // "SECTION [server]" blocks; in each, a .TP / .TQ tag (the key) and its paragraph.
  for (const block of page.split(/\n\.SH /).slice(1)) {
    // "[mcp]" is a fixed section, "[mcp.NAME]" a named one: the dot tells them apart.
    const h = /^SECTION \[([a-z]+)(\.?)/.exec(block);
    if (!h) continue;
    const fixed = SECTIONS.has(h[1]) && h[2] === '';
    const sec = fixed ? h[1] : { agent: 'agent.NAME', client: 'client.NAME', enterprise: 'enterprise.NAME', mcp: 'mcp.NAME', resource: 'resource.NAME', scope: 'scope.NAME.SCOPE', action: 'action.NAME.ACTION' }[h[1]];
    if (!sec) { problems.push(`consentd.conf.5: SECTION [${h[1]}] is not a section the code has`); continue; }
    // Consecutive tags (.TQ) share one paragraph: "defaults 20 and 100" is theirs in order.
    const items = block.split(/\n\.TP\s*\n/).slice(1);
    for (const item of items) {
      const parts = item.split(/\n\.TQ\s*\n/);
      const tags = parts.map((p) => p.trim().split('\n')[0].trim());
      const body = parts[parts.length - 1].split('\n').slice(1).join(' ').replace(/\s+/g, ' ');
      for (const tag of tags) {
        if (!/^[a-z_][a-z0-9_]*$/.test(tag)) continue;
        if (!KEYS.has(`${sec} ${tag}`)) problems.push(`consentd.conf.5: [${sec}] ${tag}: no such key`);
      }
      const keys = tags.filter((t) => KEYS.has(`${sec} ${t}`)).map((t) => [t, KEYS.get(`${sec} ${t}`)]);
      if (keys.length === 0) continue;
      const stated = [];
      const pair = /\bdefaults ([0-9.]+) and ([0-9.]+)/.exec(body);
      if (pair && keys.length === 2) { stated.push([keys[0], pair[1]], [keys[1], pair[2]]); }
      else if (keys.length === 1) {
        // "default X" (a value with spaces is written as one bold argument: up to the
        // sentence's end), "X (the default)", "(the default, X)".
        for (const m of body.matchAll(/\b[Dd]efault:? ([^,;()]+?)(?:[.;:,(]\s|[.;:]?$)/g)) stated.push([keys[0], m[1]]);
        for (const m of body.matchAll(/(?:^|\s)([^\s(]+) \(the default[),:]/g)) stated.push([keys[0], m[1]]);
        for (const m of body.matchAll(/\(the default, ([^\s)]+)\)/g)) stated.push([keys[0], m[1]]);
      }
      for (const [[key, code], raw] of stated) {
        const v = raw.replace(/[.:]$/, '');
        if (/^(the|all|a|an|with|is|for|connection)\b/.test(v) || (sec.includes('NAME') && /NAME|SCOPE|ACTION/.test(code.def))) continue;
        defaults++;
        if (!sameDefault(v, code.def))
          problems.push(`consentd.conf.5: [${sec}] ${key}: the page says the default is ${v}, the code has ${code.required ? '(required)' : code.def || '(none)'}`);
      }
    }
  }
  assert.deepEqual(problems, [], problems.join('\n'));
  assert.ok(defaults > 40, `only ${defaults} stated defaults found`);
});
