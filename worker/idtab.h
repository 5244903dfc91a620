/*
 * idtab.h — the worker's tables of objects by id, on cua_idmap: the end of any such table (each object left
 * handed to a callback), and a table that several threads look up (a backend's graphs), a cua_idmap under a lock
 * of its own. The tables borrow the objects: add hands one in, take hands it back, fini gives each left to the
 * callback. Below every other worker file (core.h, "Layers").
 */
#ifndef CUAW_IDTAB_H
#define CUAW_IDTAB_H

#include "cua_idmap.h"

#include <pthread.h>

struct wk_idtab {
	pthread_mutex_t lock; /* map; callers may hold it around a lookup and their use of the object */
	cua_idmap map;
};

/* An empty table handing out ids of [lo, hi]. */
void wk_idtab_init(struct wk_idtab *T, uint64_t lo, uint64_t hi);
/* Files obj (not NULL) under a fresh id in *id. 0, CUA_EQUOTA (every id in use) or CUA_ENOMEM. Takes the lock. */
int wk_idtab_add(struct wk_idtab *T, void *obj, uint64_t *id);
/* The object of id, or NULL. Takes the lock: the object must outlive the call by the caller's own rules. */
void *wk_idtab_get(struct wk_idtab *T, uint64_t id);
/* Removes id and returns its object (now the caller's), or NULL. Takes the lock. */
void *wk_idtab_take(struct wk_idtab *T, uint64_t id);
/* Calls fn(ud, obj) on every object left and frees the table (nothing else may use it). */
void wk_idtab_fini(struct wk_idtab *T, void (*fn)(void *ud, void *obj), void *ud);

/* The end of map m: calls fn(ud, obj) on every object in it (fn must not change m), then cua_idmap_fini. */
void wk_idmap_fini_each(cua_idmap *m, void (*fn)(void *ud, void *obj), void *ud);
/* A callback for wk_idmap_fini_each: free(obj). */
void wk_free_obj(void *ud, void *obj);

#endif
