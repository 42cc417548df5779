/* cs_err.h -- the one error enum of consentd.
 * Functions return an enum cs_err; results travel through out-parameters that
 * are written only on CS_OK.  Never put input-derived text in these messages. */
#ifndef CS_ERR_H
#define CS_ERR_H

#define CS_MUST_CHECK __attribute__((warn_unused_result))

enum cs_err {
	CS_OK = 0,
	CS_ENOMEM,       /* allocation failed */
	CS_EINVAL,       /* bad input (caller's or outsider's) */
	CS_ENOENT,       /* no such thing */
	CS_EEXIST,       /* already exists */
	CS_ETOOBIG,      /* a size cap was hit */
	CS_EIO,          /* file or network I/O failed */
	CS_EDB,          /* the database failed */
	CS_ESCHEMA,      /* the database schema is newer than this binary */
	CS_ECRYPTO,      /* a cryptographic operation failed (or did not verify) */
	CS_ECONFIG,      /* the configuration is invalid */
	CS_EPERM,        /* not allowed */
	CS_EBUSY,        /* try again later */
	CS_ESTALE,       /* the thing changed since the caller looked at it */
	CS_ERR__MAX
};

/* Returns a static, human-readable string for e; never NULL. */
const char *cs_strerror(enum cs_err e);

#endif
