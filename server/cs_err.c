/* cs_err.c -- messages for the project's error enum.  Static strings only. */
#include <stddef.h>
#include "cs_err.h"

static const char *const messages[CS_ERR__MAX] = {
	[CS_OK]      = "success",
	[CS_ENOMEM]  = "out of memory",
	[CS_EINVAL]  = "invalid input",
	[CS_ENOENT]  = "not found",
	[CS_EEXIST]  = "already exists",
	[CS_ETOOBIG] = "too large",
	[CS_EIO]     = "input/output error",
	[CS_EDB]     = "database error",
	[CS_ESCHEMA] = "database schema is newer than this consentd",
	[CS_ECRYPTO] = "cryptographic failure",
	[CS_ECONFIG] = "invalid configuration",
	[CS_EPERM]   = "not permitted",
	[CS_EBUSY]   = "busy, try again",
	[CS_ESTALE]  = "changed since it was read",
};

const char *cs_strerror(enum cs_err e)
{
	if ((unsigned)e >= CS_ERR__MAX || messages[e] == NULL)
		return "unknown error";
	return messages[e];
}
