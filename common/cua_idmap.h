/*
 * cua_idmap.h — one map from a 64-bit id to a pointer, for every id space of cuasyncd (after NNG's
 * src/core/idhash.c): streams, events, graphs, modules, host buffers, allocations by address.
 *
 * Open addressing in a power-of-two table, probed as NNG and CPython do (i = 5i + 1, which visits every cell),
 * the id mixed first so that ids with equal low bits (device addresses) spread too. Each cell counts the
 * entries whose probe passed over it ("skips"), so a lookup stops at the first cell no probe passed over and a
 * removal needs no tombstone. The table grows when it is 2/3 loaded and shrinks when below 1/8 (to 8 cells at
 * the least): its memory follows the number of entries, from none until the first one to what millions need.
 *
 * Ids: any 64-bit value may be set (0 included); cua_idmap_alloc hands out fresh ones from the map's range
 * [lo, hi], dynamically as NNG's nni_id_alloc: the one after the last it handed out, wrapping from hi to lo,
 * skipping ids in use, so a freed id comes back only after the rest of the range was used.
 *
 * Values are borrowed: the map stores the pointer and never frees, copies or reads what it points at; it must
 * not be NULL (NULL is "absent"). Whoever removes an entry, or walks the map before cua_idmap_fini, frees its
 * value if it owns it.
 *
 * No locking inside: a map belongs to whoever holds the lock the caller keeps with it. Lookups move nothing;
 * set, alloc and remove may move every entry (a resize), so no reader may run concurrently with them.
 */
#ifndef CUA_IDMAP_H
#define CUA_IDMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cua_idmap_ent; /* private to cua_idmap.c */

typedef struct cua_idmap {
	struct cua_idmap_ent *ents; /* cap cells; NULL while cap is 0 */
	size_t cap;                 /* 0 or a power of two, at least 8 */
	size_t count;               /* entries */
	size_t load;                /* entries plus skips: what probes cost; the resize trigger */
	size_t inrange;             /* entries whose id lies in [lo, hi] (alloc is full when all of it is used) */
	uint64_t lo, hi;            /* the range alloc hands ids out from, inclusive */
	uint64_t next;              /* alloc's next candidate, in [lo, hi] */
} cua_idmap;

/* An empty map whose alloc hands out ids in [lo, hi] (lo <= hi; a map only set never calls alloc: any range).
 * Allocates nothing. */
void cua_idmap_init(cua_idmap *m, uint64_t lo, uint64_t hi);
/* Frees the map's own memory (never the values: walk it first if they are to be freed) and leaves it empty and
 * usable, with the same range. Safe on an initialised map, and twice. */
void cua_idmap_fini(cua_idmap *m);

/* The value of id, or NULL when absent. Moves nothing. */
void *cua_idmap_find(const cua_idmap *m, uint64_t id);
/* Maps id (any value, in the range or not) to val (not NULL), replacing what it had. 0, or CUA_ENOMEM (the
 * table could not grow; the map is unchanged). May resize. */
int cua_idmap_set(cua_idmap *m, uint64_t id, void *val);
/* Maps a fresh id of [lo, hi] to val (not NULL) and puts it in *id. 0, CUA_EQUOTA when every id of the range
 * is in use, or CUA_ENOMEM; on failure the map and *id are unchanged. May resize. */
int cua_idmap_alloc(cua_idmap *m, uint64_t *id, void *val);
/* Removes id; returns its value (now the caller's to free, if it owned it), or NULL when it was absent. May
 * shrink the table (a failed shrink leaves it as it was). */
void *cua_idmap_remove(cua_idmap *m, uint64_t id);

/* The number of entries. */
static inline size_t
cua_idmap_count(const cua_idmap *m)
{
	return m->count;
}

/*
 * A walk over every entry, in no particular order: start with *cursor = 0; each call that returns true has put
 * one entry's id and value in *id and *val (either may be NULL) and moved *cursor past it; false: no more.
 * Between the calls of one walk the map must not be changed (set, alloc or remove may resize it), except by
 * cua_idmap_fini after the walk. To remove while walking, collect the ids first.
 */
bool cua_idmap_next(const cua_idmap *m, size_t *cursor, uint64_t *id, void **val);

#endif
