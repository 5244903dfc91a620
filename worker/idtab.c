/*
 * idtab.c — tables of objects by id (idtab.h).
 */
#include "config.h"

#include "idtab.h"

#include <stdlib.h>

void
wk_idmap_fini_each(cua_idmap *m, void (*fn)(void *ud, void *obj), void *ud)
{
	void *obj;
	for (size_t k = 0; cua_idmap_next(m, &k, NULL, &obj);)
		fn(ud, obj);
	cua_idmap_fini(m);
}

void
wk_free_obj(void *ud, void *obj)
{
	(void)ud;
	free(obj);
}

void
wk_idtab_init(struct wk_idtab *T, uint64_t lo, uint64_t hi)
{
	pthread_mutex_init(&T->lock, NULL);
	cua_idmap_init(&T->map, lo, hi);
}

int
wk_idtab_add(struct wk_idtab *T, void *obj, uint64_t *id)
{
	pthread_mutex_lock(&T->lock);
	int r = cua_idmap_alloc(&T->map, id, obj);
	pthread_mutex_unlock(&T->lock);
	return r;
}

void *
wk_idtab_get(struct wk_idtab *T, uint64_t id)
{
	pthread_mutex_lock(&T->lock);
	void *obj = cua_idmap_find(&T->map, id);
	pthread_mutex_unlock(&T->lock);
	return obj;
}

void *
wk_idtab_take(struct wk_idtab *T, uint64_t id)
{
	pthread_mutex_lock(&T->lock);
	void *obj = cua_idmap_remove(&T->map, id);
	pthread_mutex_unlock(&T->lock);
	return obj;
}

void
wk_idtab_fini(struct wk_idtab *T, void (*fn)(void *ud, void *obj), void *ud)
{
	wk_idmap_fini_each(&T->map, fn, ud);
	pthread_mutex_destroy(&T->lock);
}
