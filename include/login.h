/* login.h -- OpenID Connect sign-in for people (ARCHITECTURE.md flow E), the
 * domain: starting a login (state, nonce, PKCE, the bounds on pending starts)
 * and finishing it (the callback's checks, the code exchange, the ID token,
 * the person's user row and a fresh session), and signing out.  It knows no HTTP: the handlers
 * in login_pages.c read the request and turn these outcomes into replies. */
#ifndef CS_LOGIN_H
#define CS_LOGIN_H

#include <stdint.h>
#include "cs_err.h"
#include "session.h"

struct app;

/* The longest return_to /login accepts (bytes, decoded); every link to /login
 * that carries one must fit (admin_pages.c shortens to the bare path). */
#define LOGIN_RETURN_TO_MAX 512
/* How long a started login may take, and its binding cookie lives: 300 s (it
 * was 600).  A person at the IdP's form needs a minute or two, and every
 * abandoned start holds one of its address's [login] max_pending_per_address
 * places until it expires, so a shorter life frees them sooner. */
#define LOGIN_STATE_TTL 300

/* The key login starts are counted under for a client address (the request's
 * remote_ip text): SHA-256 of the IPv4 address, of an IPv6 address's /64 (one
 * site or device gets a whole /64), or of the text itself when it does not
 * parse; an IPv4-mapped IPv6 address counts as its IPv4 address. */
void login_client_key(const char *ip, unsigned char out[32]);

/* PKCE S256 (RFC 7636 §4.2): base64url(SHA-256(verifier)), 43 characters and a NUL. */
#define LOGIN_PKCE_CHALLENGE_LEN 43
void login_pkce_challenge(const char *verifier, char out[LOGIN_PKCE_CHALLENGE_LEN + 1]);

/* --- starting a login ------------------------------------------------------ */
struct login_begin_in {
	const char *return_to;        /* where the finished login goes; NULL: /me */
	const char *prompt, *max_age; /* validated by routes.c, passed on to the IdP; NULL: none */
	const char *remote_ip;        /* counted under login_client_key */
	const char *prev_bind;        /* this browser's earlier login-binding cookie, or NULL */
	int64_t     now;
};
struct login_begin_out {         /* release with login_begin_out_clear() */
	char   *location;                    /* malloc'd: the IdP's authorization URL */
	char    bind[SESSION_TOKEN_LEN + 1]; /* the login-binding cookie's value (a secret) */
	int64_t retry_after;                 /* seconds until a place frees (the *_FULL outcomes) */
};
void login_begin_out_clear(struct login_begin_out *o);   /* NULL-safe; wipes bind */

enum login_begin_outcome {
	LOGIN_BEGUN = 0,              /* the state is stored: send the browser to out->location */
	LOGIN_BEGIN_NO_IDP,           /* the IdP is not discovered yet */
	LOGIN_BEGIN_BAD_MAX_AGE,      /* max_age is not a number of seconds up to a year */
	LOGIN_BEGIN_ADDRESS_FULL,     /* [login] max_pending_per_address starts from this address */
	LOGIN_BEGIN_ALL_FULL,         /* [login] max_pending starts in all */
	LOGIN_BEGIN__MAX
};
/* Starts a login unless the client's address, or everyone together, already
 * has [login] max_pending_per_address / max_pending logins started and not
 * finished: then nothing is written.  A browser starting again replaces its
 * own earlier start (prev_bind).  *outcome always, *out filled on LOGIN_BEGUN
 * (location, bind) and on the *_FULL outcomes (retry_after). */
enum cs_err login_begin(struct app *app, const struct login_begin_in *in,
    struct login_begin_out *out, enum login_begin_outcome *outcome) CS_MUST_CHECK;

/* --- finishing it (the IdP's callback) ------------------------------------- */
struct login_finish_in {
	const char *state, *code, *iss, *error;  /* the callback's parameters; NULL: absent */
	const char *bind;             /* the login-binding cookie; NULL when absent or unreadable */
	const char *old_session;      /* the session cookie this login replaces, or NULL */
	int64_t     now;
};
struct login_finish_out {        /* release with login_finish_out_clear() */
	char  sid[SESSION_TOKEN_LEN + 1];    /* the new session cookie's value (a secret) */
	char *return_to;                     /* malloc'd: where the login was asked to go */
};
void login_finish_out_clear(struct login_finish_out *o); /* NULL-safe; wipes sid */

enum login_finish_outcome {
	LOGIN_FINISHED = 0,           /* signed in: the user row and a new session are written */
	LOGIN_FINISH_NO_IDP,
	LOGIN_FINISH_NO_STATE,
	LOGIN_FINISH_UNKNOWN_STATE,   /* never started, or already used */
	LOGIN_FINISH_EXPIRED,
	LOGIN_FINISH_NO_BINDING,      /* the login-binding cookie is missing */
	LOGIN_FINISH_OTHER_BROWSER,   /* ... or belongs to another start */
	LOGIN_FINISH_WRONG_ISSUER,    /* RFC 9207 iss missing or not the IdP's */
	LOGIN_FINISH_CANCELLED,       /* error=access_denied */
	LOGIN_FINISH_IDP_ERROR,       /* any other error from the IdP */
	LOGIN_FINISH_NO_CODE,
	LOGIN_FINISH_EXCHANGE_FAILED, /* the token endpoint refused the code */
	LOGIN_FINISH_UNVERIFIED,      /* the ID token did not validate */
	LOGIN_FINISH_NO_SUBJECT,      /* no usable subject claim */
	LOGIN_FINISH__MAX
};
/* Finishes a login.  The state is single-use: once presented it is deleted,
 * whatever the outcome.  On LOGIN_FINISHED the person's user row is created
 * or refreshed, the old session (old_session) ends and a new one is created,
 * in one transaction, and *out is filled.  *outcome always on CS_OK. */
enum cs_err login_finish(struct app *app, const struct login_finish_in *in,
    struct login_finish_out *out, enum login_finish_outcome *outcome) CS_MUST_CHECK;

/* --- signing out ------------------------------------------------------------ */
/* Ends the session with this id hash; then *idp_logout is the IdP's
 * end-session URL (malloc'd) when it has one, else NULL. */
enum cs_err login_end(struct app *app, const unsigned char id_hash[32],
    char **idp_logout) CS_MUST_CHECK;

#endif
