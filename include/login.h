/* login.h -- OpenID Connect sign-in for people (docs/architecture.md flow E), the
 * domain: starting a login (state, nonce, PKCE, sealed into a cookie of the
 * browser: login_cookie.h) and finishing it (the callback's checks, the code
 * exchange, the ID token, the person's user row and a fresh session), and
 * signing out.  It knows no HTTP: the handlers in login_pages.c read the
 * request and turn these outcomes into replies. */
#ifndef CS_LOGIN_H
#define CS_LOGIN_H

#include <stdint.h>
#include "cs_err.h"
#include "login_cookie.h"
#include "session.h"

struct app;

/* How long a started login may take, and its cookie lives: 300 s.  A person
 * at the IdP's form needs a minute or two. */
#define LOGIN_STATE_TTL 300

/* PKCE S256 (RFC 7636 §4.2): base64url(SHA-256(verifier)), 43 characters and a NUL. */
#define LOGIN_PKCE_CHALLENGE_LEN 43
void login_pkce_challenge(const char *verifier, char out[LOGIN_PKCE_CHALLENGE_LEN + 1]);

/* --- starting a login ------------------------------------------------------ */
struct login_begin_in {
	const char *return_to;        /* where the finished login goes; NULL: /me */
	const char *prompt, *max_age; /* validated by routes.c, passed on to the IdP; NULL: none */
	const char *cookie_header;    /* the request's Cookie header, or NULL */
	int64_t     now;
};
struct login_begin_out {         /* release with login_begin_out_clear() */
	char   *location;                    /* malloc'd: the IdP's authorization URL */
	char    name[LOGIN_COOKIE_NAME_MAX]; /* the start's cookie: its name ... */
	char   *value;                       /* ... and its value, malloc'd (sealed state) */
	/* Earlier starts' cookies to delete (login_cookie_stale). */
	char    drop[LOGIN_COOKIES_SEEN][LOGIN_COOKIE_NAME_MAX];
	size_t  ndrop;
};
void login_begin_out_clear(struct login_begin_out *o);   /* NULL-safe; wipes value */

enum login_begin_outcome {
	LOGIN_BEGUN = 0,              /* send the browser to location with the cookie set */
	LOGIN_BEGIN_NO_IDP,           /* the IdP is not discovered yet */
	LOGIN_BEGIN_BAD_MAX_AGE,      /* max_age is not a number of seconds up to a year */
	LOGIN_BEGIN__MAX
};
/* Starts a login.  SECURITY: it writes nothing at consentd (issue #28): the
 * state lives in the cookie *out names, sealed, so that no number of
 * strangers' starts can stand in the way of anyone else's.  A browser holds
 * at most LOGIN_COOKIES_MAX starts: out->drop names the earlier ones to
 * delete.  *outcome always, *out filled on LOGIN_BEGUN. */
enum cs_err login_begin(struct app *app, const struct login_begin_in *in,
    struct login_begin_out *out, enum login_begin_outcome *outcome) CS_MUST_CHECK;

/* --- finishing it (the IdP's callback) ------------------------------------- */
struct login_finish_in {
	const char *state, *code, *iss, *error;  /* the callback's parameters; NULL: absent */
	const char *cookie_header;    /* the request's Cookie header, or NULL */
	const char *old_session;      /* the session cookie this login replaces, or NULL */
	int64_t     now;
};
struct login_finish_out {        /* release with login_finish_out_clear() */
	char  sid[SESSION_TOKEN_LEN + 1];    /* the new session cookie's value (a secret) */
	char *return_to;                     /* malloc'd: where the login was asked to go */
	/* The cookie of the start the state names, to delete whatever the
	 * outcome; "" when the state was missing or not one consentd makes. */
	char  name[LOGIN_COOKIE_NAME_MAX];
};
void login_finish_out_clear(struct login_finish_out *o); /* NULL-safe; wipes sid */

enum login_finish_outcome {
	LOGIN_FINISHED = 0,           /* signed in: the user row and a new session are written */
	LOGIN_FINISH_NO_IDP,
	LOGIN_FINISH_NO_STATE,
	LOGIN_FINISH_UNKNOWN_STATE,   /* not a state consentd makes, or already used */
	LOGIN_FINISH_EXPIRED,
	LOGIN_FINISH_NO_BINDING,      /* the start's cookie is missing (another browser) */
	LOGIN_FINISH_BAD_BINDING,     /* ... does not open (altered, unreadable, two copies) */
	LOGIN_FINISH_OTHER_BROWSER,   /* ... opens but holds another state */
	LOGIN_FINISH_WRONG_ISSUER,    /* RFC 9207 iss missing or not the IdP's */
	LOGIN_FINISH_CANCELLED,       /* error=access_denied */
	LOGIN_FINISH_IDP_ERROR,       /* any other error from the IdP */
	LOGIN_FINISH_NO_CODE,
	LOGIN_FINISH_EXCHANGE_FAILED, /* the token endpoint refused the code */
	LOGIN_FINISH_UNVERIFIED,      /* the ID token did not validate */
	LOGIN_FINISH_NO_SUBJECT,      /* no usable subject claim */
	LOGIN_FINISH__MAX
};
/* Finishes a login: the state's cookie (in->cookie_header) must open and hold
 * the state's hash.  The state is single-use: a state that signed someone in
 * is recorded as used (store_login_used_*), after the IdP answered, in the
 * transaction that writes the session; a used one is refused before the IdP
 * is asked.  On LOGIN_FINISHED the person's user row is created or refreshed,
 * the old session (old_session) ends and a new one is created, in that
 * transaction, and *out is filled.  out->name on every outcome that named a
 * cookie.  *outcome always on CS_OK. */
enum cs_err login_finish(struct app *app, const struct login_finish_in *in,
    struct login_finish_out *out, enum login_finish_outcome *outcome) CS_MUST_CHECK;

/* --- signing out ------------------------------------------------------------ */
/* Ends the session with this id hash; then *idp_logout is the IdP's
 * end-session URL (malloc'd) when it has one, else NULL. */
enum cs_err login_end(struct app *app, const unsigned char id_hash[32],
    char **idp_logout) CS_MUST_CHECK;

#endif
