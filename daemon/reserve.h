/*
 * reserve.h — the limited resources of sessions and tenants (enum res_kind, session.h), one row each, and their
 * reservations (docs/ARCHITECTURE.md, "Admission reserves, completion confirms").
 *
 * A request that makes a limited object says so in its row (struct cmd_entry.reserve): once its validation
 * passed, request.c asks do_reserve for what it will hold. Every limit — the session's (--session-*) and its
 * tenant's (`[tenant NAME]`, all its sessions together) — is checked against what is held plus what requests
 * admitted before and not yet settled have reserved, and the amount is then reserved in the request and its
 * session. When the request is settled, whatever happened to it (completed, failed in the worker, refused later in
 * its validation, its context lost, its session closed before it ran), do_unreserve gives the reservation back:
 * on success its row's complete counted the object by then. So no interleaving of pipelined requests, sessions or
 * tenants passes a limit, and no command has to undo a reservation itself.
 *
 * A closing session's objects stay counted (session and tenant) until the session is freed, which is after its
 * work drained and its cleanup freed them (shared isolation) or its work drained and its own worker is retired
 * (session isolation): memory still allocated on the device is never missing from a count.
 *
 * Under --isolation session a session also holds a worker of its own per device it uses: do_reserve_worker
 * counts it, from the validation of its first request there until the session is freed, against
 * --session-workers (all sessions) and --tenant-session-workers (or the tenant's `workers`).
 *
 * Every function expects fe->lock held and never blocks.
 */
#ifndef CUAD_RESERVE_H
#define CUAD_RESERVE_H

#include "request.h"

/* Amounts by kind (RES_MEM on the request's device). */
struct resv {
	uint64_t n[RES_COUNT];
};

/* Reserves want for r (on r->dev for RES_MEM) after checking every limit of r's session and its tenant: 0, or
 * QUOTA with a message in e naming the limit, the amounts and the option or tenant key that raises it (nothing
 * reserved then). */
int do_reserve(struct fe *fe, struct request *r, const struct resv *want, cua_err *e) CUA_REQUIRES(cuad_fe_lock);
/* The same check without reserving anything: for a validation that must refuse early, before it acts on the
 * request (HOST_REGISTER opens the client's memory only for a request within its limits). */
int do_reserve_check(struct fe *fe, const struct request *r, const struct resv *want, cua_err *e)
	CUA_REQUIRES(cuad_fe_lock);
/* Gives back whatever r reserved (harmless when it reserved nothing). */
void do_unreserve(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock);
/* --isolation session: r needs its session's own worker on r->dev; when the session has none there yet, one is
 * counted for it (until the session is freed). 0, QUOTA (its tenant's bound) or BUSY (the daemon's) with a message
 * in e. Nothing to do for a shared session or a request without a device. */
int do_reserve_worker(struct fe *fe, struct request *r, cua_err *e) CUA_REQUIRES(cuad_fe_lock);

#endif
