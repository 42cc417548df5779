/* pages.c -- what the person's pages share (consent_pages.c, approval_pages.c,
 * me_pages.c): agent text made visible, times and names as templates show
 * them, and the 403 page for a request opened by another account (the
 * provider's callback is vault_pages.c).  It must never show agent text
 * unfiltered. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <jansson.h>
#include "agent.h"
#include "app.h"
#include "buf.h"
#include "consent.h"
#include "form.h"
#include "login.h"
#include "page_reply.h"
#include "pages.h"
#include "session.h"
#include "vault.h"
#include "vault_connect.h"

/* ---- Invisible characters ---------------------------------------------
 * The code points visible_text() shows as a marker such as "[U+200B]" instead of passing on.
 * They are Unicode's Default_Ignorable_Code_Point, all of it, reserved ranges
 * included, from DerivedCoreProperties.txt of Unicode 15.0.0 (Debian 12's
 * unicode-data package; test_token_visible_text_every_default_ignorable_marked
 * holds this table against that file).  That set already holds every bidi
 * control (U+061C, U+200E-200F, U+202A-202E, U+2066-2069).  To it we add the
 * C0 controls but LF, DEL and the C1 controls: LF stays because a parameter's
 * text on the approval page is shown line by line (the exact canonical JSON has
 * none: JCS writes it as \n).
 * Sorted and disjoint, for the binary search below. */
struct cp_range {
	uint32_t lo, hi;
};

static const struct cp_range hidden_ranges[] = {
	{ 0x0000, 0x0009 },     /* C0 controls before LF */
	{ 0x000b, 0x001f },     /* C0 controls after LF */
	{ 0x007f, 0x009f },     /* DEL, C1 controls */
	{ 0x00ad, 0x00ad },     /* SOFT HYPHEN */
	{ 0x034f, 0x034f },     /* COMBINING GRAPHEME JOINER */
	{ 0x061c, 0x061c },     /* ARABIC LETTER MARK */
	{ 0x115f, 0x1160 },     /* HANGUL CHOSEONG FILLER, HANGUL JUNGSEONG FILLER */
	{ 0x17b4, 0x17b5 },     /* KHMER VOWEL INHERENT AQ, AA */
	{ 0x180b, 0x180f },     /* MONGOLIAN FREE VARIATION SELECTORS, VOWEL SEPARATOR */
	{ 0x200b, 0x200f },     /* ZERO WIDTH SPACE .. RIGHT-TO-LEFT MARK */
	{ 0x202a, 0x202e },     /* LEFT-TO-RIGHT EMBEDDING .. RIGHT-TO-LEFT OVERRIDE */
	{ 0x2060, 0x206f },     /* WORD JOINER .. NOMINAL DIGIT SHAPES, reserved U+2065 */
	{ 0x3164, 0x3164 },     /* HANGUL FILLER */
	{ 0xfe00, 0xfe0f },     /* VARIATION SELECTOR-1..16 */
	{ 0xfeff, 0xfeff },     /* ZERO WIDTH NO-BREAK SPACE (BOM) */
	{ 0xffa0, 0xffa0 },     /* HALFWIDTH HANGUL FILLER */
	{ 0xfff0, 0xfff8 },     /* reserved */
	{ 0x1bca0, 0x1bca3 },   /* SHORTHAND FORMAT LETTER OVERLAP .. UP STEP */
	{ 0x1d173, 0x1d17a },   /* MUSICAL SYMBOL BEGIN BEAM .. END PHRASE */
	{ 0xe0000, 0xe0fff },   /* TAG characters, VARIATION SELECTOR-17..256, reserved */
};

static bool cp_hidden(uint32_t cp)
{
	size_t lo = 0, hi = sizeof hidden_ranges / sizeof hidden_ranges[0];
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (cp < hidden_ranges[mid].lo)
			hi = mid;
		else if (cp > hidden_ranges[mid].hi)
			lo = mid + 1;
		else
			return true;
	}
	return false;
}

#define UTF8_ILL_FORMED UINT32_MAX

/* Decodes the UTF-8 sequence that starts at p (NUL-terminated) into *cp and
 * returns its length.  An ill-formed sequence (overlong, a surrogate, past
 * U+10FFFF, truncated, a stray continuation byte) gives UTF8_ILL_FORMED and
 * the length of its maximal subpart, at least 1, so that each one becomes a
 * single U+FFFD as Unicode 15.0 section 3.9 recommends.  The byte ranges are
 * those of its table 3-7; a NUL fails every continuation test, so nothing
 * past the terminator is read. */
static size_t utf8_next(const unsigned char *p, uint32_t *cp)
{
	unsigned c = p[0], lo = 0x80, hi = 0xbf;      /* lo..hi: the second byte */
	size_t n;
	uint32_t v;
	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
		v = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		v = c & 0x0f;
		lo = c == 0xe0 ? 0xa0 : 0x80;             /* no overlongs */
		hi = c == 0xed ? 0x9f : 0xbf;             /* no surrogates */
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		v = c & 0x07;
		lo = c == 0xf0 ? 0x90 : 0x80;             /* no overlongs */
		hi = c == 0xf4 ? 0x8f : 0xbf;             /* nothing past U+10FFFF */
	} else {
		*cp = UTF8_ILL_FORMED;                    /* C0, C1, F5-FF, or a continuation */
		return 1;
	}
	for (size_t k = 1; k < n; k++, lo = 0x80, hi = 0xbf) {
		if (p[k] < lo || p[k] > hi) {
			*cp = UTF8_ILL_FORMED;
			return k;
		}
		v = v << 6 | (p[k] & 0x3fu);
	}
	*cp = v;
	return n;
}

/* SECURITY: agent-supplied text is decoded completely before it is shown, so
 * no invisible character and no ill-formed byte reaches the page raw. */
char *visible_text(const char *s)
{
	struct buf b;
	const unsigned char *p = (const unsigned char *)s;
	size_t len = strlen(s);
	enum cs_err e = CS_OK;
	/* Each input byte makes at most 8 output bytes ("[U+0001]" for one). */
	if (len > (SIZE_MAX - 1) / 8)
		return NULL;
	buf_init(&b, 8 * len);
	while (*p && e == CS_OK) {
		uint32_t cp;
		size_t n = utf8_next(p, &cp);
		if (cp == UTF8_ILL_FORMED)
			e = buf_append(&b, "\xef\xbf\xbd", 3);              /* U+FFFD */
		else if (cp_hidden(cp))
			e = buf_printf(&b, "[U+%04X]", (unsigned)cp);
		else
			e = buf_append(&b, p, n);
		p += n;
	}
	if (e != CS_OK) {
		buf_clear(&b);
		return NULL;
	}
	return buf_steal(&b);
}

/* A time for a template: {"iso": "2026-12-01T20:00:00Z", "utc": "2026-12-01 20:00 UTC"},
 * written <time datetime="{{iso}}" title="{{utc}}">{{utc}}</time>, which
 * /static/local-time.js rewrites into the reader's local time (the title keeps UTC). */
json_t *pages_time_value(int64_t t)
{
	char iso[32] = "", utc[32] = "";
	time_t tt = (time_t)t;
	struct tm tm;
	if (gmtime_r(&tt, &tm) == NULL || strftime(iso, sizeof iso, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0 ||
	    strftime(utc, sizeof utc, "%Y-%m-%d %H:%M UTC", &tm) == 0)
		return NULL;
	return json_pack("{s:s, s:s}", "iso", iso, "utc", utc);
}

/* The return_to path /kind/id/tail (tail "" or "/done"), or "/me" when it
 * would not fit: no real id is that long, and the session gate (routes.c)
 * falls back the same way for a return_to /login would refuse. */
const char *pages_return_path(char out[LOGIN_RETURN_TO_MAX + 1], const char *kind,
    const char *id, const char *tail)
{
	return str_fmt(out, LOGIN_RETURN_TO_MAX + 1, "/%s/%s%s", kind, id, tail) == CS_OK ? out :
	    "/me";
}

const char *pages_agent_name(const struct config *cfg, const char *id)
{
	struct agent_view a;
	return agent_resolve(cfg, id, &a) ? a.name : id;
}

const char *pages_resource_name(const struct config *cfg, const char *id)
{
	const struct config_resource *r = config_resource(cfg, id);
	return r ? r->name : id;
}

/* Who is deciding, as the page names them: the IdP's name, else the e-mail, else the
 * subject, with invisible characters made visible. */
char *pages_signed_in_name(const struct session *s)
{
	const char *n = s->name && *s->name ? s->name : s->email && *s->email ? s->email : s->subject;
	return visible_text(n ? n : "");
}

/* SECURITY: session binding (invariant 4).  A request opened by another
 * account is audited (consent_refuse_binding; f names the request, its
 * actor and time are filled here) and answered with a 403 page that offers
 * to sign in as the right person; the request stays pending for its person.
 * kind is "consent" or "approve" (the page's path). */
enum cs_err pages_refuse_other_account(const struct http_request *req, struct http_reply *rep,
    const struct session *s, const char *kind, struct consent_refusal *f)
{
	char loginurl[200];
	json_t *ctx;
	enum cs_err e;
	f->actor = req->auth.actor;
	f->now = req->now;
	if ((e = consent_refuse_binding(store_conn(req->app->store), f)) != CS_OK)
		return e;
	if ((e = str_fmt(loginurl, sizeof loginurl, "/login?prompt=login&return_to=%%2F%s%%2F%s",
	    kind, f->request_id)) != CS_OK)
		return e;
	ctx = json_pack("{s:s, s:s}", "title", "This request is for another account",
	    "login_url", loginurl);
	e = page_render(rep, 403, "consent_other.html", ctx, s);
	json_decref(ctx);
	return e;
}
