#include "config.h"

#include "cua_arena.h"
#include "cua_error.h"

#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

/* Heap slots come from malloc, which must then be 16-byte aligned like the inline ones. */
_Static_assert(alignof(max_align_t) >= CUA_ARENA_SLOT, "malloc alignment below the slot size");
_Static_assert(sizeof(cua_slot) == CUA_ARENA_SLOT, "slot size");

void
cua_arena_init(cua_arena *a)
{
	a->heap_values = NULL;
	a->heap_offsets = NULL;
	a->heap_values_cap = a->heap_offsets_cap = 0;
	a->nslots = a->nargs = 0;
}

void
cua_arena_fini(cua_arena *a)
{
	free(a->heap_values);
	free(a->heap_offsets);
	cua_arena_init(a);
}

static size_t
slots_for(size_t size)
{
	size_t n = (size + CUA_ARENA_SLOT - 1) / CUA_ARENA_SLOT;
	return n == 0 ? 1 : n;
}

/* Moves the inline arena to the heap with room for at least need_slots slots and need_args arguments.
 * Slots move as bytes: a padded value's padding is never interpreted. */
static int
spill(cua_arena *a, size_t need_slots, size_t need_args)
{
	size_t vcap = 2 * need_slots, ocap = 2 * need_args;
	cua_slot *v = malloc(vcap * sizeof(*v));
	size_t *o = malloc(ocap * sizeof(*o));
	if (v == NULL || o == NULL) {
		free(v);
		free(o);
		return CUA_ENOMEM;
	}
	memcpy(v, a->inline_values, a->nslots * sizeof(*v));
	for (size_t i = 0; i < a->nargs; i++)
		o[i] = a->inline_offsets[i];
	a->heap_values = v;
	a->heap_offsets = o;
	a->heap_values_cap = vcap;
	a->heap_offsets_cap = ocap;
	return 0;
}

static int
grow_heap(cua_arena *a, size_t need_slots, size_t need_args)
{
	if (need_slots > a->heap_values_cap) {
		size_t cap = a->heap_values_cap * 2 > need_slots ? a->heap_values_cap * 2 : need_slots;
		cua_slot *v = realloc(a->heap_values, cap * sizeof(*v));
		if (v == NULL)
			return CUA_ENOMEM;
		a->heap_values = v;
		a->heap_values_cap = cap;
	}
	if (need_args > a->heap_offsets_cap) {
		size_t cap = a->heap_offsets_cap * 2 > need_args ? a->heap_offsets_cap * 2 : need_args;
		size_t *o = realloc(a->heap_offsets, cap * sizeof(*o));
		if (o == NULL)
			return CUA_ENOMEM;
		a->heap_offsets = o;
		a->heap_offsets_cap = cap;
	}
	return 0;
}

int
cua_arena_push(cua_arena *a, const void *value, size_t size)
{
	if (value == NULL || size == 0 || size > SIZE_MAX / 2)
		return CUA_EBAD_ARGUMENT;
	size_t slots = slots_for(size);
	size_t at = a->nslots;
	cua_slot *base;

	if (a->heap_values == NULL) {
		if (at + slots <= CUA_ARENA_INLINE && a->nargs < CUA_ARENA_INLINE) {
			base = a->inline_values;
			a->inline_offsets[a->nargs] = (uint8_t)at;
			goto write;
		}
		int r = spill(a, at + slots, a->nargs + 1);
		if (r != 0)
			return r;
	} else {
		int r = grow_heap(a, at + slots, a->nargs + 1);
		if (r != 0)
			return r;
	}
	base = a->heap_values;
	a->heap_offsets[a->nargs] = at;
write:
	/* Zero the whole span, then write through a pointer derived from the whole array. */
	memset(base + at, 0, slots * sizeof(cua_slot));
	memcpy((unsigned char *)(base + at), value, size);
	a->nslots += slots;
	a->nargs++;
	return 0;
}

int
cua_arena_with_params(cua_arena *a, cua_arena_params_fn fn, void *ud)
{
	if (a->heap_values == NULL) {
		void *ptrs[CUA_ARENA_INLINE];
		for (size_t i = 0; i < a->nargs; i++)
			ptrs[i] = a->inline_values + a->inline_offsets[i];
		return fn(ptrs, a->nargs, ud);
	}
	void **ptrs = malloc(a->nargs * sizeof(*ptrs));
	if (ptrs == NULL)
		return CUA_ENOMEM;
	for (size_t i = 0; i < a->nargs; i++)
		ptrs[i] = a->heap_values + a->heap_offsets[i];
	int r = fn(ptrs, a->nargs, ud);
	free(ptrs);
	return r;
}
