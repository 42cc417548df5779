/* vault_pages.h -- the vault's browser pages: the provider's answer at
 * /oauth/callback/{resource} (flows B + D).  The connecting itself is
 * vault_connect.h's; this only maps its outcome to a reply. */
#ifndef CS_VAULT_PAGES_H
#define CS_VAULT_PAGES_H
#include "http.h"

/* GET /oauth/callback/{resource}: finishes the connection begun in the
 * signed-in session and sends the browser on to /consent/{id}/done (never to
 * a URL holding the code); a 400 page when the answer belongs to no
 * connection of this session. */
enum cs_err vault_pages_callback(const struct http_request *, struct http_reply *) CS_MUST_CHECK;

#endif
