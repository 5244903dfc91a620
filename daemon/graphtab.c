/*
 * graphtab.c — a session's graph records and their pins (see graphtab.h). fe->lock held throughout.
 */
#include "config.h"

#include "graphtab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fgraph *
do_graph_new(struct session *s, int dev, uint32_t gen, uint32_t nnodes, uint64_t req)
{
	struct fgraph *g = calloc(1, sizeof(*g));
	if (g == NULL)
		return NULL;
	g->nodes = calloc(nnodes ? nnodes : 1, sizeof(*g->nodes));
	if (g->nodes == NULL) {
		free(g);
		return NULL;
	}
	g->req = req;
	g->slot = UINT32_MAX;
	g->dev = dev;
	g->gen = gen;
	g->nnodes = nnodes;
	LIST_INSERT_HEAD(&s->graphs, g, link);
	return g;
}

void
do_graph_free(struct session *s, struct fgraph *g)
{
	(void)s;
	LIST_REMOVE(g, link);
	free(g->nodes);
	free(g->pins);
	free(g);
}

void
do_graphs_free(struct session *s)
{
	struct fgraph *g;
	while ((g = LIST_FIRST(&s->graphs)) != NULL)
		do_graph_free(s, g);
}

struct fgraph *
do_graph_by_req(struct session *s, uint64_t req)
{
	struct fgraph *g;
	LIST_FOREACH(g, &s->graphs, link)
	if (g->req == req && g->slot == UINT32_MAX)
		return g;
	return NULL;
}

struct fgraph *
do_graph_by_slot(struct session *s, uint32_t slot)
{
	struct fgraph *g;
	LIST_FOREACH(g, &s->graphs, link)
	if (g->slot == slot)
		return g;
	return NULL;
}

/* The module whose global holds addr, or -1. */
static int32_t
global_module(const struct session *s, uint64_t addr) CUA_REQUIRES(cuad_fe_lock)
{
	for (uint32_t i = 0; i < s->nglobals; i++)
		if (addr >= s->globals[i].addr && addr - s->globals[i].addr < s->globals[i].len)
			return (int32_t)s->globals[i].module_slot;
	return -1;
}

int
do_graph_pin(struct session *s, struct fgraph *g, uint32_t node, uint64_t addr, uint64_t len, uint64_t req)
{
	if (g->npins == g->pins_cap) {
		uint32_t cap = g->pins_cap ? 2 * g->pins_cap : 8;
		struct gpin *n = realloc(g->pins, cap * sizeof(*n));
		if (n == NULL)
			return CUA_ENOMEM;
		g->pins = n;
		g->pins_cap = cap;
	}
	g->pins[g->npins++] = (struct gpin){node, global_module(s, addr), addr, len, req};
	return 0;
}

void
do_graph_pins_commit(struct fgraph *g, uint32_t node, uint64_t req, bool ok)
{
	for (uint32_t i = 0; i < g->npins;) {
		struct gpin *p = &g->pins[i];
		bool drop = p->node == node && (ok ? p->req == 0 : p->req == req);
		if (drop) {
			*p = g->pins[--g->npins];
			continue;
		}
		if (ok && p->node == node && p->req == req)
			p->req = 0;
		i++;
	}
}

/* Whether g still pins: it is being made, or live in the current context (not of a lost one). */
static bool
graph_pins(struct fe *fe, const struct session *s, const struct fgraph *g) CUA_REQUIRES(cuad_fe_lock)
{
	if (g->slot != UINT32_MAX && s->slots[g->slot].stale)
		return false;
	return g->gen == 0 || g->gen == do_session_gen(fe, s, g->dev);
}

/* "graph 0x…" or "the graph being created by request seq N" into buf. */
static const char *
graph_name(const struct session *s, const struct fgraph *g, char *buf, size_t len) CUA_REQUIRES(cuad_fe_lock)
{
	if (g->slot == UINT32_MAX) {
		snprintf(buf, len, "the graph being created by request %llu", (unsigned long long)g->req);
		return buf;
	}
	const struct hslot *h = &s->slots[g->slot];
	snprintf(buf, len, "graph 0x%llx",
		 (unsigned long long)cua_handle_make(CUA_HK_GRAPH, h->dev, h->gen, h->tag, g->slot));
	return buf;
}

int
do_graph_check_free(struct fe *fe, struct session *s, uint64_t addr, uint64_t len, cua_err *e)
{
	struct fgraph *g;
	char name[96];
	LIST_FOREACH(g, &s->graphs, link)
	{
		if (!graph_pins(fe, s, g))
			continue;
		for (uint32_t i = 0; i < g->npins; i++) {
			const struct gpin *p = &g->pins[i];
			if (p->module_slot < 0 && p->addr >= addr && p->addr - addr < len)
				return cua_err_set(e, CUA_EBUSY,
						   "0x%llx is used by node %u of %s: destroy the graph first "
						   "(cua_graph_destroy), then free the memory",
						   (unsigned long long)addr, p->node,
						   graph_name(s, g, name, sizeof(name)));
		}
	}
	return 0;
}

int
do_graph_check_unload(struct fe *fe, struct session *s, uint32_t module_slot, cua_err *e)
{
	struct fgraph *g;
	char name[96];
	LIST_FOREACH(g, &s->graphs, link)
	{
		if (!graph_pins(fe, s, g))
			continue;
		for (uint32_t i = 0; i < g->nnodes; i++) {
			const struct gnode *n = &g->nodes[i];
			uint32_t fs = cua_handle_slot(n->function);
			if (n->kind == CUA_OP_LAUNCH && fs < s->nslots && s->slots[fs].kind == CUA_HK_FUNCTION &&
			    s->slots[fs].module_slot == module_slot)
				return cua_err_set(e, CUA_EBUSY,
						   "node %u of %s launches a kernel of this module: destroy the graph "
						   "first (cua_graph_destroy), then unload the module",
						   i, graph_name(s, g, name, sizeof(name)));
		}
		for (uint32_t i = 0; i < g->npins; i++)
			if (g->pins[i].module_slot == (int32_t)module_slot)
				return cua_err_set(e, CUA_EBUSY,
						   "node %u of %s uses a global of this module: destroy the graph "
						   "first "
						   "(cua_graph_destroy), then unload the module",
						   g->pins[i].node, graph_name(s, g, name, sizeof(name)));
	}
	return 0;
}
