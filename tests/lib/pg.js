// A throw-away PostgreSQL 15 server for tests: Debian's server binaries, a fresh
// cluster in a temporary directory, reachable only through a Unix socket in that
// directory (no TCP), with a database `consentd`.
//
//   const pg = await startPostgres();
//   pg.url          // postgresql:///consentd?host=DIR&user=postgres (a libpq URI)
//   pg.socketDir    // DIR: the socket's directory (the temporary directory itself)
//   pg.dataDir      // DIR/data; the server's log is DIR/log
//   pg.pid          // the postmaster's pid (a new one after restart())
//   await pg.psql(sql)  // runs sql with psql on the consentd database -> its output,
//                       // unaligned, tuples only ("1\n" for SELECT 1); rejects on an error
//   await pg.restart()  // stops the server (data kept) and starts it again on the same socket
//   await pg.stop()     // pg_ctl stop -m fast, SIGKILL by pid if it is still there, then
//                       // removes DIR; safe to call twice
//
// PostgreSQL refuses to run as root: as root the directory is given to user postgres and
// initdb/pg_ctl run through `runuser -u postgres --`; as anyone else they run as that user.
// $TEST_PG_BIN overrides the binaries' directory (default /usr/lib/postgresql/15/bin).
// A server still running when this process exits (or dies of SIGINT/SIGTERM/SIGHUP) is
// stopped by pid and its directory removed, as proc.js does for its children.
import { execFile, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { pidAlive } from './proc.js';

const execFileP = promisify(execFile);
export const pgBin = process.env.TEST_PG_BIN || '/usr/lib/postgresql/15/bin';
// psql itself, not /usr/bin/psql: that is Debian's pg_wrapper, a Perl script that picks
// the version (about 50 ms of CPU a call, three times psql's own; the tests make ~1,000).
export const psqlBin = join(pgBin, 'psql');
const asRoot = process.getuid() === 0;
const live = new Set();
let hooksInstalled = false;

// [cmd, args] for a server binary, as user postgres when we are root.
function asPostgres(tool, args) {
  const cmd = join(pgBin, tool);
  return asRoot ? ['runuser', ['-u', 'postgres', '--', cmd, ...args]] : [cmd, args];
}

async function run(tool, args, { timeout = 60000 } = {}) {
  const [cmd, argv] = asPostgres(tool, args);
  try {
    return await execFileP(cmd, argv, { timeout, encoding: 'utf8' });
  } catch (e) {
    throw new Error(`${tool} ${args.join(' ')} failed: ${(e.stderr || e.stdout || e.message).trim()}`);
  }
}

// Synchronous, for the exit hook: an immediate shutdown, then SIGKILL, then the directory.
function killNow(pg) {
  const [cmd, argv] = asPostgres('pg_ctl', ['-D', pg.dataDir, 'stop', '-m', 'immediate', '-w',
    '-t', '10']);
  spawnSync(cmd, argv, { stdio: 'ignore', timeout: 15000 });
  if (running(pg.pid)) {
    try { process.kill(pg.pid, 'SIGKILL'); } catch { /* gone */ }
  }
  rmSync(pg.socketDir, { recursive: true, force: true });
}

function killAllNow() {
  for (const pg of live) killNow(pg);
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

// A process that still runs: pidAlive, but a zombie (dead, waiting for its parent, which
// for a daemonised postmaster is init) counts as gone.
function running(pid) {
  if (!pid || !pidAlive(pid)) return false;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

function readPid(dataDir) {
  return Number.parseInt(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0], 10);
}

export async function startPostgres({ timeoutMs = 60000 } = {}) {
  installHooks();
  const dir = mkdtempSync(join(tmpdir(), 'consentd-pg-'));
  // The directory goes into -o "... unix_socket_directories=DIR" (a shell word, then a
  // list of directories): keep it to characters that mean nothing to either.
  if (!/^[A-Za-z0-9/._-]+$/.test(dir)) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`startPostgres: temporary directory ${dir} has characters the socket path cannot take`);
  }
  // Other local users (a test's consentd under another uid) may reach the socket;
  // the data directory itself is initdb's, mode 0700.
  try {
    chmodSync(dir, 0o755);
    if (asRoot) {
      const { uid, gid } = passwdEntry('postgres');
      chownSync(dir, uid, gid);
    }
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }

  const pg = {
    socketDir: dir,
    dataDir: join(dir, 'data'),
    logPath: join(dir, 'log'),
    url: `postgresql:///consentd?host=${dir}&user=postgres`,
    pid: null,
    stopped: false,
  };
  const opts = `-c listen_addresses='' -c unix_socket_directories=${dir} -c fsync=on`;
  const log = () => { try { return readFileSync(pg.logPath, 'utf8'); } catch { return ''; } };

  const start = async () => {
    try {
      await run('pg_ctl', ['-D', pg.dataDir, '-o', opts, '-l', pg.logPath, 'start', '-w',
        '-t', String(Math.ceil(timeoutMs / 1000))], { timeout: timeoutMs + 5000 });
    } catch (e) {
      throw new Error(`${e.message}\n--- postgres log ---\n${log()}`);
    }
    pg.pid = readPid(pg.dataDir);
  };

  // Stops the server; SIGKILL when pg_ctl could not.  Then waits (up to 10 s) for the
  // pid to be reaped too, so that a caller's pidAlive(pid) says false afterwards.
  const halt = async () => {
    try {
      await run('pg_ctl', ['-D', pg.dataDir, 'stop', '-m', 'fast', '-w', '-t', '30'],
        { timeout: 40000 });
    } catch { /* not running, or stuck: the pid decides */ }
    if (running(pg.pid)) {
      try { process.kill(pg.pid, 'SIGKILL'); } catch { /* gone */ }
    }
    for (let i = 0; i < 200 && pg.pid && pidAlive(pg.pid); i++) await sleep(50);
  };

  live.add(pg);
  try {
    await run('initdb', ['-D', pg.dataDir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8',
      '--locale=C'], { timeout: timeoutMs });
    await start();
  } catch (e) {
    live.delete(pg);
    killNow(pg);
    throw e;
  }

  pg.psql = async (sql, { db = 'consentd' } = {}) => {
    const url = db === 'consentd' ? pg.url : `postgresql:///${db}?host=${dir}&user=postgres`;
    try {
      const { stdout } = await execFileP(psqlBin, ['-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1',
        '-d', url, '-c', sql], { timeout: 60000, encoding: 'utf8' });
      return stdout;
    } catch (e) {
      throw new Error(`psql failed: ${(e.stderr || e.message).trim()}\n  in: ${sql}`);
    }
  };
  pg.restart = async () => {
    if (pg.stopped) throw new Error('restart: the server was stopped');
    await halt();
    await start();
  };
  pg.stop = async () => {
    if (pg.stopped) return;
    pg.stopped = true;
    await halt();
    live.delete(pg);
    rmSync(dir, { recursive: true, force: true });
  };

  try {
    await pg.psql('CREATE DATABASE consentd', { db: 'postgres' });
  } catch (e) {
    await pg.stop();
    throw e;
  }
  return pg;
}

// The uid and gid of a local user, from /etc/passwd (no getpwnam in Node).
function passwdEntry(name) {
  const line = readFileSync('/etc/passwd', 'utf8').split('\n').find((l) => l.startsWith(`${name}:`));
  if (!line) throw new Error(`startPostgres: no user ${name} (is postgresql installed?)`);
  const f = line.split(':');
  return { uid: Number(f[2]), gid: Number(f[3]) };
}

export default startPostgres;
