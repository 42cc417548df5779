// tests/lib/pg.js itself: a private PostgreSQL starts, answers through its socket
// (the URL it hands out works with psql), survives a restart on the same socket
// under a new postmaster pid, and stop() leaves no process and no directory behind.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { startPostgres } from '../lib/pg.js';
import { pidAlive } from '../lib/proc.js';

test('startPostgres: SELECT 1, restart, SELECT 1, stop removes everything', async () => {
  const pg = await startPostgres();
  let stopped = false;
  try {
    assert.match(pg.url, /^postgresql:\/\/\/consentd\?host=\/.+&user=postgres$/);
    assert.ok(existsSync(pg.dataDir) && existsSync(pg.socketDir));
    assert.ok(pidAlive(pg.pid), 'the postmaster runs');
    assert.equal(await pg.psql('SELECT 1'), '1\n');
    // The URL on its own, as a libpq client (the driver) will use it.
    assert.equal(execFileSync('psql', ['-X', '-A', '-t', '-d', pg.url, '-c', 'SELECT current_database()'],
      { encoding: 'utf8' }), 'consentd\n');
    await pg.psql('CREATE TABLE kept (v BIGINT); INSERT INTO kept VALUES (42)');

    const before = pg.pid;
    await pg.restart();
    assert.ok(pidAlive(pg.pid), 'the postmaster runs again');
    assert.notEqual(pg.pid, before, 'a new postmaster');
    assert.ok(!pidAlive(before), 'the old postmaster is gone');
    assert.equal(await pg.psql('SELECT 1'), '1\n');
    assert.equal(await pg.psql('SELECT v FROM kept'), '42\n', 'data survives the restart');

    await assert.rejects(pg.psql('SELECT * FROM no_such_table'), /no_such_table/);

    const pid = pg.pid;
    await pg.stop();
    stopped = true;
    assert.ok(!pidAlive(pid), 'the postmaster is gone');
    assert.ok(!existsSync(pg.socketDir), 'the directory is removed');
    await pg.stop();   // twice is fine
  } finally {
    if (!stopped) await pg.stop();
  }
});
