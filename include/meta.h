/* meta.h -- handlers for public metadata, keys, health and static pages. */
#ifndef CS_META_H
#define CS_META_H
#include "http.h"

enum cs_err meta_as_metadata(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
/* GET /.well-known/oauth-protected-resource/mcp/{name}: RFC 9728 metadata of
 * the MCP endpoint [mcp.NAME] (issue #30); 404 for an unknown name. */
enum cs_err meta_protected_resource(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
enum cs_err meta_jwks(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
enum cs_err meta_healthz(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
/* 200 when the database answers and a signing key is loaded; 503 otherwise. */
enum cs_err meta_readyz(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
enum cs_err meta_stylesheet(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
/* /static/local-time.js: turns the pages' <time> elements (written in UTC) into the
 * reader's local time; the only script the pages load (CSP script-src 'self'). */
enum cs_err meta_local_time_script(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
/* GET /static/favicon.svg and /favicon.ico: the icon, image/svg+xml, cached an hour. */
enum cs_err meta_favicon(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
/* GET /: a way in, and after a sign-out what ended (?state=, routes.c's words). */
enum meta_index_param { META_INDEX_STATE };
enum cs_err meta_index(const struct http_request *, struct http_reply *) CS_MUST_CHECK;

#endif
