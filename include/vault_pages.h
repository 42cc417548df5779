/* vault_pages.h -- the vault's browser pages: the provider's answer at
 * /oauth/callback/{resource} (flows B + D), and the API key page.  The connecting itself is
 * vault_connect.h's; this only maps its outcome to a reply. */
#ifndef CS_VAULT_PAGES_H
#define CS_VAULT_PAGES_H
#include "http.h"

/* The provider's answer's parameters by position (routes.c declares them in
 * this order; http_arg reads them): every one RFC 6749 and RFC 9207 define
 * for a code response, and the scope some providers add. */
enum vault_pages_callback_param { VAULT_PAGES_CALLBACK_CODE, VAULT_PAGES_CALLBACK_STATE,
	VAULT_PAGES_CALLBACK_ISS, VAULT_PAGES_CALLBACK_ERROR, VAULT_PAGES_CALLBACK_ERROR_DESCRIPTION,
	VAULT_PAGES_CALLBACK_ERROR_URI, VAULT_PAGES_CALLBACK_SCOPE };

/* GET /oauth/callback/{resource}: finishes the connection begun in the
 * signed-in session and sends the browser on to /consent/{id}/done (never to
 * a URL holding the code); a 400 page when the answer belongs to no
 * connection of this session. */
enum cs_err vault_pages_callback(const struct http_request *, struct http_reply *) CS_MUST_CHECK;

/* The API key page's form parameters by position (routes.c). */
enum vault_pages_key_param { VAULT_PAGES_KEY_CSRF, VAULT_PAGES_KEY_KEY };

/* GET /me/consents/{id}/key: for the signed-in person's live consent of a
 * credential = api_key resource, a form to enter (or replace) its key, and
 * whether one is stored -- never the key.  404 for any other consent
 * (another person's included). */
enum cs_err vault_pages_key_show(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
/* POST /me/consents/{id}/key (session form, CSRF): seals the key
 * (vault_key_store) and sends the browser back to the page (303); 400 for a
 * key that is not visible ASCII, 404 as above. */
enum cs_err vault_pages_key_store(const struct http_request *, struct http_reply *) CS_MUST_CHECK;

#endif
