/*
 * cuac_builder.h — the builder layer of libcuasync: the files behind the public calls that make requests, and
 * what they (and client.c above them) call in each other. The layer calls down into the flight, transport and
 * errors layers (cuac_flight.h, cuac_transport.h, cuac_error.h). Inside it, a file calls only those after it:
 *   graph.c    CUDA graphs (a graph is a batch you instantiate)  -> batch.c
 *   batch.c    explicit batches (cua_batch_*)                     -> launch.c
 *   launch.c   the launch builder and cua_launch_submit
 *   event.c    CUDA events
 *   calls.c    the synchronous calls (HELLO, DEVICES, STATUS, modules, memory, copies, streams) -> hostbuf.c
 *   hostbuf.c  memfd host buffers shared with the daemon
 * See internal.h for the layer order.
 */
#ifndef CUAC_BUILDER_H
#define CUAC_BUILDER_H

#include "internal.h"

/* ------------------------------------------------------------------ calls.c */

/* HELLO (unordered, retried on a transport error while a restarting listener takes the pipe); sets
 * c->session. The connecting thread; blocks. */
int cuac_hello(cua_client *c);

/* DEVICES: refreshes c->devs under c->lock. Blocks; caller holds no lock. */
int cuac_load_devices(cua_client *c);

/* Frees every function layout. Only while no other thread uses c (disconnect). */
void cuac_layouts_fini(cua_client *c);

/* ------------------------------------------------------------------ hostbuf.c */

/* The registered buffer holding [p, p+len), if any: returns 1 with its handle and the offset of p, else 0.
 * Takes c->lock; caller holds no lock. */
int cuac_host_lookup(cua_client *c, const void *p, size_t len, uint64_t *handle, uint64_t *off);

/* Unmaps and closes every host buffer (the daemon released them with the session). Only after the
 * transport is closed, while no other thread uses c. */
void cuac_hostbufs_fini(cua_client *c);

/* A synchronous copy of op (CUA_OP_MEMCPY_HTOD_HOST or CUA_OP_MEMCPY_DTOH_HOST) of bytes between dev and host
 * memory h (not a host buffer) through the client's staging buffer, a chunk at a time, on stream s. 1: done, *r
 * its status; 0: not staged (too small, several devices, the buffer busy or not to be had): the caller carries
 * the bytes. Blocks; caller holds no lock. */
int cuac_staged_copy(cua_client *c, uint32_t op, cua_deviceptr dev, void *h, size_t bytes, cua_stream s, int *r);

/* ------------------------------------------------------------------ launch.c */

/* A new pending LAUNCH item for l, which it then owns; on failure l is freed and cua_last_error set. Any
 * thread that owns l; no lock. */
int cuac_pending_launch(cua_launch *l, struct cuac_pending **out);

#endif
