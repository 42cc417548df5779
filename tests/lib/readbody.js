// The body of an incoming node:http request as UTF-8 text, at most limit bytes: a larger one
// throws "body too large".  Shared by the test servers (tests/lib) and the development servers
// (tests/idp).
export async function readBodyUpTo(req, limit) {
  const chunks = [];
  let n = 0;
  for await (const c of req) {
    n += c.length;
    if (n > limit) throw new Error('body too large');
    chunks.push(c);
  }
  return Buffer.concat(chunks).toString('utf8');
}
