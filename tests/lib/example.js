// Loads examples/gateway-dpop.mjs, the gateway's side as README shows it, for the tests.
// The example imports jose like any gateway would; examples/ has no node_modules of its
// own, so a link to tests/node_modules is made there first (node_modules/ is ignored by git).
import { existsSync, symlinkSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const link = join(root, 'examples', 'node_modules');
if (!existsSync(link)) {
  try { symlinkSync(join('..', 'tests', 'node_modules'), link); } catch (e) { if (e.code !== 'EEXIST') throw e; }
}
export const example = await import(join(root, 'examples', 'gateway-dpop.mjs'));
