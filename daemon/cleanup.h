/*
 * cleanup.h — a closing session's cleanup request (REQ_CLEANUP), planned when it is dispatched.
 */
#ifndef CUAD_CLEANUP_H
#define CUAD_CLEANUP_H

#include "request.h"

/* Plans r's commands: the release of everything r's session still holds on r->dev, streams first (they
 * drain), then modules and host buffers, then memory; sets r->planned. Caller holds fe->lock (the dispatcher). */
void do_cleanup_plan(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock);

#endif
