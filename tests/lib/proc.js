// Child processes for tests: start, wait until ready, collect output, stop by PID.
//
//   const p = await startProcess(cmd, args, {
//     env,               // merged over process.env (pass env: {X: undefined} to drop X)
//     cwd,
//     ready,             // what "ready" means (default /^READY /m on stdout):
//                        //   RegExp or string -> matched against each stdout line
//                        //   function(line, stream) -> truthy when ready ('stdout' | 'stderr')
//                        //   { url, status? } -> polled (GET) until it answers [with that status]
//                        //   null -> do not wait
//     timeoutMs = 60000, // for becoming ready (a bound for a machine under load, not a speed)
//     name,              // label for errors and echo (default: basename of cmd)
//     echo,              // copy output to our stderr with a [name] prefix
//                        // (default: env TEST_VERBOSE set)
//     group,             // the child leads a process group of its own, and every signal
//                        // below goes to the whole group: a server that forks workers
//                        // which outlive a killed master (nginx)
//   });
//   p.pid, p.child      // the ChildProcess
//   p.readyMatch        // RegExp match array / predicate value / fetch Response
//   p.stdout, p.stderr  // output so far (strings, capped at 4 MiB each)
//   p.output()          // stdout + stderr, for error messages
//   p.exited            // Promise<{code, signal}>; p.exitStatus once exited (else null)
//   await p.stop(timeoutMs = 5000)  // SIGTERM to p.pid, SIGKILL after timeoutMs; -> {code, signal}
//
// startProcess rejects (and kills the child) when it exits or times out before it is ready; the
// error message carries its output. Every live child is SIGKILLed by PID when this process exits,
// and on SIGINT/SIGTERM/SIGHUP to this process (which then dies of that signal as usual).
import { spawn } from 'node:child_process';
import { basename } from 'node:path';

const MAX_OUTPUT = 4 * 1024 * 1024;
const live = new Set();
let hooksInstalled = false;

// A signal to p's process, or to its whole process group (opts.group).
function signal(p, sig) {
  try { process.kill(p.group ? -p.pid : p.pid, sig); } catch { /* already gone */ }
}

function killAllNow() {
  for (const p of live) signal(p, 'SIGKILL');
  live.clear();
}

function installHooks() {
  if (hooksInstalled) return;
  hooksInstalled = true;
  process.on('exit', killAllNow);
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    const onSig = () => {
      killAllNow();
      // Die of the signal as we would have without this handler (unless others handle it).
      if (process.listenerCount(sig) === 1) {
        process.removeListener(sig, onSig);
        process.kill(process.pid, sig);
      }
    };
    process.on(sig, onSig);
  }
}

const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });

export async function startProcess(cmd, args = [], opts = {}) {
  const {
    env, cwd, timeoutMs = 60000, echo = !!process.env.TEST_VERBOSE, group = false,
  } = opts;
  const ready = opts.ready === undefined ? /^READY /m : opts.ready;
  const name = opts.name || basename(cmd);
  installHooks();

  const child = spawn(cmd, args, {
    cwd,
    env: { ...process.env, ...(env || {}) },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: group,     // POSIX: a new session and process group, led by the child
  });

  const p = {
    name,
    child,
    group,
    pid: child.pid,
    stdout: '',
    stderr: '',
    readyMatch: null,
    exitStatus: null,
    output() {
      return `--- ${name} stdout ---\n${p.stdout}--- ${name} stderr ---\n${p.stderr}`;
    },
  };

  let onLine = null; // set while waiting for a line-based ready condition
  const partial = { stdout: '', stderr: '' };
  const feed = (stream) => (buf) => {
    const s = buf.toString('utf8');
    if (p[stream].length < MAX_OUTPUT) p[stream] += s;
    if (echo) process.stderr.write(s.replace(/^(?=.)/gm, `[${name}${stream === 'stderr' ? '!' : ''}] `));
    partial[stream] += s;
    const lines = partial[stream].split('\n');
    partial[stream] = lines.pop();
    if (onLine) for (const line of lines) onLine(line, stream);
  };
  child.stdout.on('data', feed('stdout'));
  child.stderr.on('data', feed('stderr'));

  p.exited = new Promise((resolve) => {
    child.once('exit', (code, signal) => {
      p.exitStatus = { code, signal };
      live.delete(p);
      resolve(p.exitStatus);
    });
  });
  const spawnError = new Promise((resolve) => { child.once('error', resolve); });

  if (child.pid === undefined) {
    const err = await spawnError;
    throw new Error(`${name}: cannot start ${cmd}: ${err.message}`);
  }
  live.add(p);

  p.stop = async (stopTimeoutMs = 5000) => {
    if (p.exitStatus) return p.exitStatus;
    signal(p, 'SIGTERM');
    const t = setTimeout(() => signal(p, 'SIGKILL'), stopTimeoutMs);
    const st = await p.exited;
    clearTimeout(t);
    return st;
  };

  if (ready === null) return p;

  let waitReady;
  if (ready instanceof RegExp || typeof ready === 'string' || typeof ready === 'function') {
    const test = typeof ready === 'function' ? ready
      : (line, stream) => stream === 'stdout' && (typeof ready === 'string'
        ? (line.includes(ready) ? [line] : null) : line.match(ready));
    waitReady = new Promise((resolve) => {
      onLine = (line, stream) => {
        const m = test(line, stream);
        if (m) { onLine = null; resolve(m); }
      };
    });
  } else if (ready && typeof ready.url === 'string') {
    waitReady = (async () => {
      for (;;) {
        if (p.exitStatus) return new Promise(() => {}); // the exit branch wins
        try {
          const res = await fetch(ready.url, { redirect: 'manual', signal: AbortSignal.timeout(2000) });
          await res.arrayBuffer().catch(() => {});
          if (ready.status === undefined || res.status === ready.status) return res;
        } catch { /* not yet */ }
        await sleep(100);
      }
    })();
  } else {
    throw new Error(`${name}: bad ready option`);
  }

  let timer;
  const outcome = await Promise.race([
    waitReady.then((m) => ({ ok: m })),
    p.exited.then((st) => ({ exit: st })),
    spawnError.then((err) => ({ error: err })),
    new Promise((resolve) => { timer = setTimeout(() => resolve({ timeout: true }), timeoutMs); }),
  ]);
  clearTimeout(timer);
  onLine = null;
  if (outcome.ok) {
    p.readyMatch = outcome.ok;
    return p;
  }
  await p.stop(1000);
  const why = outcome.exit ? `exited (code ${outcome.exit.code}, signal ${outcome.exit.signal}) before it was ready`
    : outcome.error ? `failed: ${outcome.error.message}` : `was not ready after ${timeoutMs} ms`;
  throw new Error(`${name} ${why}\n${p.output()}`);
}

// true when a process with this pid exists (and is not a zombie we could see).
export function pidAlive(pid) {
  try {
    process.kill(pid, 0);
  } catch (e) {
    return e.code === 'EPERM';
  }
  return true;
}

export default startProcess;
