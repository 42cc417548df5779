/* arena.h -- request-lifetime memory: a bump allocator over a first block the
 * caller provides (inline in the request's own state, so a typical request
 * allocates nothing more) and heap blocks past it, all released at once.
 * Never frees one piece, never reallocates, never hands out more than its cap. */
#ifndef CS_ARENA_H
#define CS_ARENA_H

#include <stddef.h>

#define ARENA_ALIGN 16u              /* every piece starts on this boundary */
#define ARENA_HEAP_BLOCK 4096u       /* the least a heap block holds */

struct arena_block;

struct arena {                       /* caller-owned; arena_init, then arena_clear */
	unsigned char      *first;       /* the caller's block, aligned (NULL: none) */
	size_t              first_size, first_used;
	struct arena_block *heap;        /* blocks past the first, the newest first:
	                                    pieces come from it once there is one */
	size_t              total;       /* bytes handed out since the last clear */
	size_t              cap;         /* the most it hands out between two clears */
};

/* Starts a over first[0 .. first_size) (first may be NULL with size 0); pieces
 * past it come from the heap until cap bytes have been handed out in all. */
void arena_init(struct arena *a, void *first, size_t first_size, size_t cap);
/* n bytes aligned to ARENA_ALIGN, valid until arena_clear; n == 0 gives a
 * valid one-byte piece.  NULL when the cap would be passed or memory is out:
 * nothing of a is changed then. */
void *arena_alloc(struct arena *a, size_t n);
/* A NUL-terminated copy of the first n bytes of s (s need not be terminated
 * within them; n == SIZE_MAX is refused); NULL as arena_alloc. */
char *arena_strndup(struct arena *a, const char *s, size_t n);
char *arena_strdup(struct arena *a, const char *s);
/* Wipes every byte handed out (request data holds credentials), frees the
 * heap blocks and starts over on the first block.  NULL-safe. */
void arena_clear(struct arena *a);

#endif
