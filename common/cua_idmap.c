/*
 * cua_idmap.c — the id map (cua_idmap.h): open addressing with skip counts, after NNG's src/core/idhash.c.
 *
 * What must hold: ents[i].val != NULL marks a live entry; a live entry lies on the probe path of its id, and
 * every cell its path passed over before reaching it counts it in skips; load = count + the sum of skips.
 */
#include "config.h"

#include "cua_idmap.h"

#include "cua_error.h"

#include <stdlib.h>

struct cua_idmap_ent {
	uint64_t id;
	void *val;    /* NULL: empty */
	size_t skips; /* live entries whose probe passed over this cell */
};

#define MIN_CAP 8u

/* The first cell of id's probe: the id mixed (splitmix64's finalizer), so that ids sharing their low bits (device
 * addresses, 256-byte aligned) spread over the table. */
static size_t
first_cell(const cua_idmap *m, uint64_t id)
{
	id ^= id >> 30;
	id *= 0xbf58476d1ce4e5b9ull;
	id ^= id >> 27;
	id *= 0x94d049bb133111ebull;
	id ^= id >> 31;
	return (size_t)id & (m->cap - 1);
}

/* The cell after i on a probe path: visits every cell of a power-of-two table (CPython's dict). */
static size_t
next_cell(const cua_idmap *m, size_t i)
{
	return (i * 5 + 1) & (m->cap - 1);
}

static bool
in_range(const cua_idmap *m, uint64_t id)
{
	return id >= m->lo && id <= m->hi;
}

/* The cell of id, or SIZE_MAX when absent. */
static size_t
cell_of(const cua_idmap *m, uint64_t id)
{
	if (m->count == 0)
		return SIZE_MAX;
	size_t start = first_cell(m, id), i = start;
	do {
		const struct cua_idmap_ent *e = &m->ents[i];
		if (e->val != NULL && e->id == id)
			return i;
		if (e->skips == 0)
			return SIZE_MAX; /* no probe went further from here */
		i = next_cell(m, i);
	} while (i != start);
	return SIZE_MAX;
}

/* Puts (id, val) in the first empty cell of id's path, which the caller knows to exist (count < cap) and id to be
 * absent. */
static void
place(cua_idmap *m, uint64_t id, void *val)
{
	size_t i = first_cell(m, id);
	for (;;) {
		struct cua_idmap_ent *e = &m->ents[i];
		m->load++;
		if (e->val == NULL) {
			e->id = id;
			e->val = val;
			m->count++;
			return;
		}
		e->skips++;
		i = next_cell(m, i);
	}
}

/* Moves every entry into a table of cap cells. 0 or CUA_ENOMEM (nothing changed). */
static int
resize(cua_idmap *m, size_t cap)
{
	struct cua_idmap_ent *old = m->ents, *ents = calloc(cap, sizeof(*ents));
	size_t oldcap = m->cap;
	if (ents == NULL)
		return CUA_ENOMEM;
	m->ents = ents;
	m->cap = cap;
	m->count = m->load = 0;
	for (size_t i = 0; i < oldcap; i++)
		if (old[i].val != NULL)
			place(m, old[i].id, old[i].val);
	free(old);
	return 0;
}

/* The smallest table for n entries at half load: a power of two, at least MIN_CAP. */
static size_t
cap_for(size_t n)
{
	size_t cap = MIN_CAP;
	while (cap < 2 * n)
		cap *= 2;
	return cap;
}

void
cua_idmap_init(cua_idmap *m, uint64_t lo, uint64_t hi)
{
	*m = (cua_idmap){.lo = lo, .hi = hi, .next = lo};
}

void
cua_idmap_fini(cua_idmap *m)
{
	free(m->ents);
	cua_idmap_init(m, m->lo, m->hi);
}

void *
cua_idmap_find(const cua_idmap *m, uint64_t id)
{
	size_t i = cell_of(m, id);
	return i == SIZE_MAX ? NULL : m->ents[i].val;
}

int
cua_idmap_set(cua_idmap *m, uint64_t id, void *val)
{
	size_t i = cell_of(m, id);
	if (i != SIZE_MAX) {
		m->ents[i].val = val;
		return 0;
	}
	if (m->load >= m->cap * 2 / 3) { /* 2/3 loaded (an empty map: no table yet) */
		size_t cap = cap_for(m->count + 1);
		if (resize(m, cap > m->cap ? cap : 2 * m->cap) != 0)
			return CUA_ENOMEM;
	}
	place(m, id, val);
	if (in_range(m, id))
		m->inrange++;
	return 0;
}

int
cua_idmap_alloc(cua_idmap *m, uint64_t *id, void *val)
{
	if (m->inrange > m->hi - m->lo) /* all hi - lo + 1 ids in use */
		return CUA_EQUOTA;
	uint64_t from = m->next, cand;
	do { /* ends: some id of the range is free */
		cand = m->next;
		m->next = m->next == m->hi ? m->lo : m->next + 1;
	} while (cell_of(m, cand) != SIZE_MAX);
	int r = cua_idmap_set(m, cand, val);
	if (r != 0) {
		m->next = from;
		return r;
	}
	*id = cand;
	return 0;
}

void *
cua_idmap_remove(cua_idmap *m, uint64_t id)
{
	size_t at = cell_of(m, id);
	if (at == SIZE_MAX)
		return NULL;
	void *val = m->ents[at].val;
	for (size_t i = first_cell(m, id); i != at; i = next_cell(m, i)) { /* the cells its probe passed over */
		m->ents[i].skips--;
		m->load--;
	}
	m->ents[at].val = NULL;
	m->load--;
	m->count--;
	if (in_range(m, id))
		m->inrange--;
	if (m->cap > MIN_CAP && m->load < m->cap / 8 && cap_for(m->count) < m->cap)
		(void)resize(m, cap_for(m->count)); /* without memory to shrink, it stays as large */
	return val;
}

bool
cua_idmap_next(const cua_idmap *m, size_t *cursor, uint64_t *id, void **val)
{
	for (size_t i = *cursor; i < m->cap; i++)
		if (m->ents[i].val != NULL) {
			if (id)
				*id = m->ents[i].id;
			if (val)
				*val = m->ents[i].val;
			*cursor = i + 1;
			return true;
		}
	*cursor = m->cap;
	return false;
}
