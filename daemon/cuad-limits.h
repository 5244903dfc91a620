/*
 * cuad-limits.h — the daemon's coupled limits: numbers that size a table in one file and bound an option or a
 * wire field in another, tied together here by _Static_assert so that raising one without the others does not
 * compile. (Not named limits.h: -I daemon would shadow the C library's <limits.h>.)
 *
 * The option rows (options-table.c) take their ranges from these constants.
 */
#ifndef CUAD_CUAD_LIMITS_H
#define CUAD_CUAD_LIMITS_H

#include "cua_proto.h"

#include <stdint.h>

/* ---- devices: CUA_MAX_DEVICES (cua_proto.h) sizes every per-device array of the daemon and bounds
 * --emu-devices and --devices. */

/* A set of devices, one bit each: fe->drained (the operator's DRAIN). */
typedef uint64_t cuad_devmask;
_Static_assert(CUA_MAX_DEVICES <= sizeof(cuad_devmask) * 8, "a device mask has one bit per device");
/* A handle carries its device in CUA_HANDLE_DEV_MASK's bits (cua_handle_make). */
_Static_assert(CUA_MAX_DEVICES - 1 <= CUA_HANDLE_DEV_MASK, "a handle's device bits name every device");

/* ---- streams */

/* --pool-streams: a session's pool on each device, at most (the option's upper bound). The session's pool table
 * (session.h's struct spool) is sized by the pool the worker made, so nothing cuts a pool short. */
#define CUAD_POOL_STREAMS_MAX 64 /* no suffix: options-table.c writes it into --help */

/* --session-streams: a session's streams, its pool streams included, at most (the option's upper bound). */
#define CUAD_SESSION_STREAMS_MAX 4000u
/* --session-streams' default (the option row writes it as a string: options-table.c checks they agree). A
 * session's pool counts against it, so the default leaves room for the largest pool on one device; a
 * configuration with --pool-streams above --session-streams is refused at start (options.c), as no session
 * could create its pool. */
#define CUAD_SESSION_STREAMS_DEFAULT 64
_Static_assert(CUAD_POOL_STREAMS_MAX <= CUAD_SESSION_STREAMS_DEFAULT,
	       "with the default --session-streams a session holds the largest pool");
_Static_assert(CUAD_SESSION_STREAMS_DEFAULT <= CUAD_SESSION_STREAMS_MAX, "the default is in the range");

/* A worker's streams on one device, all sessions together (worker/cuda_impl.h MAX_STREAMS and
 * worker/backend_emu.c EMU_MAX_STREAMS hold the same number; the worker does not include this file). One
 * session at its largest limit, with a pool on the device, fits in one worker. */
#define CUAD_WORKER_STREAMS 4096u
_Static_assert(CUAD_SESSION_STREAMS_MAX + CUAD_POOL_STREAMS_MAX <= CUAD_WORKER_STREAMS,
	       "one session at its stream limit fits in a worker's stream table");

#endif
