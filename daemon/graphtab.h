/*
 * graphtab.h — a session's graphs as the front-end keeps them (GRAPH_* requests, cmd-graph.c): what each node
 * is, and what it pins. A graph holds device pointers and functions; it must never run with memory freed since
 * (in a shared context another tenant may own it now) nor with a function of an unloaded module. So every
 * device range a node names, and every module its kernels come from, is pinned while the graph lives: MEM_FREE
 * of pinned memory and MODULE_UNLOAD of a pinned module are refused with BUSY until the graph is destroyed.
 *
 * Pins are taken when a request is validated (GRAPH_CREATE, GRAPH_SET_ARGS), in sequence order, so a later
 * MEM_FREE of the session sees them even while the creating request still runs; they are dropped when
 * GRAPH_DESTROY is validated (it is a barrier: it runs after every earlier launch of the graph completed).
 * A graph of a lost context pins nothing. Every function expects fe->lock held and never blocks.
 */
#ifndef CUAD_GRAPHTAB_H
#define CUAD_GRAPHTAB_H

#include "session.h"

/* One device range a node uses (launch pointer arguments, memset destination, copy source and destination). */
struct gpin {
	uint32_t node;
	int32_t module_slot; /* the range is in a global of this module (its handle slot), else -1 */
	uint64_t addr, len;
	uint64_t req; /* the GRAPH_SET_ARGS that added it, until that completed (0: in effect) */
};

/* One node, as GRAPH_SET_ARGS needs it again. */
struct gnode {
	uint32_t kind;     /* CUA_OP_LAUNCH, CUA_OP_MEMSET or CUA_OP_MEMCPY_DTOD */
	uint64_t function; /* launches: the function handle */
	uint32_t grid[3], block[3], shared_mem;
};

struct fgraph {
	uint64_t req;  /* the GRAPH_CREATE making it, until it completed (0 after) */
	uint32_t slot; /* its handle slot once made, else UINT32_MAX */
	int dev;
	uint32_t gen; /* the worker generation its objects belong to */
	struct gnode *nodes;
	uint32_t nnodes;
	struct gpin *pins;
	uint32_t npins, pins_cap;
	LIST_ENTRY(fgraph) link;
};

/* A new graph record of s for request req, with room for nnodes nodes (zeroed), or NULL (out of memory). */
struct fgraph *do_graph_new(struct session *s, int dev, uint32_t gen, uint32_t nnodes, uint64_t req)
	CUA_REQUIRES(cuad_fe_lock);
/* Frees g and takes it off s's list. */
void do_graph_free(struct session *s, struct fgraph *g) CUA_REQUIRES(cuad_fe_lock);
/* Frees every graph record of s (the session is being freed). */
void do_graphs_free(struct session *s) CUA_REQUIRES(cuad_fe_lock);
/* The graph being made by request req, or the one in handle slot slot; NULL when none. */
struct fgraph *do_graph_by_req(struct session *s, uint64_t req) CUA_REQUIRES(cuad_fe_lock);
struct fgraph *do_graph_by_slot(struct session *s, uint32_t slot) CUA_REQUIRES(cuad_fe_lock);
/* Pins [addr, addr+len) for node (a range do_alloc_find accepted). req: 0 for a GRAPH_CREATE, else the
 * GRAPH_SET_ARGS request (the pin is pending until do_graph_pins_commit). 0 or CUA_ENOMEM. */
int do_graph_pin(struct session *s, struct fgraph *g, uint32_t node, uint64_t addr, uint64_t len, uint64_t req)
	CUA_REQUIRES(cuad_fe_lock);
/* GRAPH_SET_ARGS req on node completed: on success the node's older pins go and req's stay, else req's go. */
void do_graph_pins_commit(struct fgraph *g, uint32_t node, uint64_t req, bool ok) CUA_REQUIRES(cuad_fe_lock);
/* MEM_FREE of the allocation [addr, addr+len): BUSY (naming the graph) when a graph of s uses it, else 0. */
int do_graph_check_free(struct fe *fe, struct session *s, uint64_t addr, uint64_t len, cua_err *e)
	CUA_REQUIRES(cuad_fe_lock);
/* MODULE_UNLOAD of the module in handle slot module_slot: BUSY when a graph of s launches one of its kernels
 * or uses one of its globals, else 0. */
int do_graph_check_unload(struct fe *fe, struct session *s, uint32_t module_slot, cua_err *e)
	CUA_REQUIRES(cuad_fe_lock);

#endif
