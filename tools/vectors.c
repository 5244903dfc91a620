/*
 * vectors.c — the golden vectors (the .hex files of proto/vectors/): one session of one client, message by message, plus
 * an error reply of each family of status codes. See vectors.h.
 *
 * The session: a daemon started with `--backend emu --emu-sm 80` serves one emulated device (device 0, worker
 * generation 1). The client says HELLO (seq 0, unordered), PINGs (seq 0), then sends its ordered requests
 * with seq 1, 2, 3 … in the order below: it loads an emulated-device module naming the built-in kernel axpy,
 * allocates 1 MiB, computes y = 2·x + y on four floats on its own stream (x = 1, 2, 3, 4; y = 1, 1, 1, 1
 * by memset; y becomes 3, 5, 7, 9), copies through a registered host buffer, does it all again as one BATCH,
 * makes a CUDA graph of three nodes, launches it, changes its kernel's arguments and destroys it, frees the memory, looks up the module's global `coeffs`, raises axpy's dynamic shared memory limit, reads it
 * back, asks its occupancy, times a stretch of its ordered stream with two events (record both, make the stream
 * wait for one, synchronize, query, elapsed time, destroy one), and unloads the module. STATUS (seq 0) comes last.
 */
#include "config.h"

#include "vectors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BYTES(s) ((cua_bytes){(s), (uint32_t)(sizeof(s) - 1)})

/* Handles as the daemon makes them (cua_handle_make; a constant expression here): kind · device 0 ·
 * generation 1 · tag · slot, where slot k of a session starts with tag salt + k·7919 and takes + 1 on use
 * (daemon/session.c); the salt is random per session, 0x5a00 here. */
#define TAG_SALT 0x5a00u
#define HANDLE(kind, slot)                                                                                             \
	(((uint64_t)(kind) << 60) | ((uint64_t)1 << 40) |                                                              \
	 ((uint64_t)((TAG_SALT + (slot)*7919u + 1u) & 0xffffu) << 24) | (uint64_t)(slot))
#define MODULE HANDLE(CUA_HK_MODULE, 0)     /* 0x1000015a01000000 */
#define FUNCTION HANDLE(CUA_HK_FUNCTION, 1) /* 0x20000178f0000001 */
#define STREAM HANDLE(CUA_HK_STREAM, 2)     /* 0x30000197df000002 */
#define BUFFER HANDLE(CUA_HK_HOSTBUF, 3)    /* 0x400001b6ce000003 */
/* The graph takes the slot the stream left last (slot 2), its tag one further. */
#define GRAPH (HANDLE(CUA_HK_GRAPH, 2) + ((uint64_t)1 << 24)) /* 0x60000197e0000002 */
/* The events reuse the slots the graph and the host buffer left (the last freed first), each with its next tag. */
#define EVENT_A (HANDLE(CUA_HK_EVENT, 2) + ((uint64_t)2 << 24)) /* 0x50000197e1000002 */
#define EVENT_B (HANDLE(CUA_HK_EVENT, 3) + ((uint64_t)1 << 24)) /* 0x500001b6cf000003 */

/* Device pointers of the emulated device 0, generation 1 (its memory starts at 0x100 << 40 | 1 << 36): the
 * module's 16-byte global `coeffs` at its start (allocated when the module loads, 256-byte aligned), then the
 * 1 MiB allocation: x at its start, y 4 KiB in, z (the DTOD copy of y) 8 KiB in. */
#define PTR_G 0x0001001000000000ull
#define PTR_X (PTR_G + 0x100)
#define PTR_Y (PTR_X + 0x1000)
#define PTR_Z (PTR_X + 0x2000)

/* little-endian floats: x = 1, 2, 3, 4; 2·x + 1 = 3, 5, 7, 9 */
#define X_BYTES "\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x40\x40\x00\x00\x80\x40"
#define Y_BYTES "\x00\x00\x40\x40\x00\x00\xa0\x40\x00\x00\xe0\x40\x00\x00\x10\x41"

/* ------------------------------------------------------------------ request bodies */

static const struct cua_req_hello q_hello = {1, 1, BYTES("example-client"), 4242};
static const struct cua_req_ping q_ping = {0x0123456789abcdefull};
static const struct cua_req_module_load q_mload = {0, CUA_IMAGE_EMU,
						   BYTES("cuasync-emu-module\naxpy\nglobal coeffs 16\n")};
static const struct cua_req_function_get q_fget = {MODULE, BYTES("axpy")};
static const struct cua_req_mem_alloc q_alloc = {0, 1u << 20};
static const struct cua_req_stream_create q_screate = {0, 0, 0};
static const struct cua_req_memcpy_htod q_htod = {PTR_X, STREAM, BYTES(X_BYTES)};
static const struct cua_req_memset q_memset = {PTR_Y, 0x3f800000u /* 1.0f */, 4, 4, STREAM};
static cua_wire_arg q_args[] = {
	{CUA_ARG_BYTES, 0, BYTES("\x00\x00\x00\x40")},                 /* a = 2.0f */
	{CUA_ARG_DEVPTR, PTR_X, {NULL, 0}},                            /* x */
	{CUA_ARG_DEVPTR, PTR_Y, {NULL, 0}},                            /* y */
	{CUA_ARG_BYTES, 0, BYTES("\x04\x00\x00\x00\x00\x00\x00\x00")}, /* n = 4 (uint64_t) */
};
static const struct cua_req_launch q_launch = {FUNCTION, {1, 1, 1}, {4, 1, 1}, 0, STREAM, 0, q_args, 4};
static const struct cua_req_memcpy_dtoh q_dtoh = {PTR_Y, 16, STREAM};
static const struct cua_req_memcpy_dtod q_dtod = {PTR_Z, PTR_Y, 16, STREAM};
static const struct cua_req_host_register q_hreg = {0, 3, 2u << 20};
static const struct cua_req_memcpy_host q_htod_host = {PTR_X, STREAM, BUFFER, 0, 16};
static const struct cua_req_memcpy_host q_dtoh_host = {PTR_Y, STREAM, BUFFER, 4096, 16};
static cua_batch_item q_items[] = {
	{.kind = CUA_OP_MEMCPY_HTOD_HOST, .u.host = {PTR_X, STREAM, BUFFER, 0, 16}},
	{.kind = CUA_OP_MEMSET, .u.memset = {PTR_Y, 0x3f800000u, 4, 4, STREAM}},
	/* with LAUNCH's optional tail: cooperative (flags bit 2), no cluster, the launch's own priority -2 */
	{.kind = CUA_OP_LAUNCH,
	 .u.launch = {FUNCTION,
		      {1, 1, 1},
		      {4, 1, 1},
		      0,
		      STREAM,
		      CUA_LAUNCH_COOPERATIVE,
		      q_args,
		      4,
		      {0, 0, 0},
		      -2,
		      CUA_LAUNCH_FIELDS_PRIORITY}},
	{.kind = CUA_OP_MEMCPY_DTOH, .u.dtoh = {PTR_Y, 16, STREAM}},
	{.kind = CUA_OP_MEMCPY_DTOD, .u.dtod = {PTR_Z, PTR_Y, 16, STREAM}},
};
static const struct cua_req_batch q_batch = {0, q_items, 5};
static const struct cua_req_stream q_stream = {STREAM};
static const struct cua_req_host_unregister q_hunreg = {BUFFER};
static const struct cua_req_mem_free q_free = {PTR_X};
static const struct cua_req_module_unload q_munload = {MODULE};
static const struct cua_req_module_get_global q_gglobal = {MODULE, BYTES("coeffs")};
static const struct cua_req_func_attribute q_setattr = {FUNCTION, CUA_FATTR_MAX_DYNAMIC_SHARED, 65536};
static const struct cua_req_func_attribute q_getattr = {FUNCTION, CUA_FATTR_MAX_DYNAMIC_SHARED, 0};
static const struct cua_req_occupancy q_occ = {FUNCTION, 256, 65536};
static cua_wire_arg q_gargs[] = {
	{CUA_ARG_BYTES, 0, BYTES("\x00\x00\x80\x3f")}, /* 1.0f */
	{CUA_ARG_DEVPTR, PTR_X, {NULL, 0}},
	{CUA_ARG_DEVPTR, PTR_Y, {NULL, 0}},
	{CUA_ARG_BYTES, 0, BYTES("\x04\x00\x00\x00\x00\x00\x00\x00")},
};
static cua_batch_item q_gitems[] = {
	{CUA_OP_MEMSET, {.memset = {PTR_Y, 0, 4, 4, 0}}},
	{CUA_OP_LAUNCH, {.launch = {FUNCTION, {1, 1, 1}, {4, 1, 1}, 0, 0, 0, q_gargs, 4}}},
	{CUA_OP_MEMCPY_DTOD, {.dtod = {PTR_Z, PTR_Y, 16, 0}}},
};
static const struct cua_req_graph_create q_gcreate = {0, q_gitems, 3};
static const struct cua_rep_graph_create p_gcreate = {GRAPH, 3};
static const struct cua_req_graph_launch q_glaunch = {GRAPH, CUA_STREAM_ORDERED_ID, 0};
static cua_wire_arg q_gnewargs[] = {
	{CUA_ARG_BYTES, 0, BYTES("\x00\x00\x00\x40")}, /* 2.0f */
	{CUA_ARG_DEVPTR, PTR_X, {NULL, 0}},
	{CUA_ARG_DEVPTR, PTR_Y, {NULL, 0}},
	{CUA_ARG_BYTES, 0, BYTES("\x04\x00\x00\x00\x00\x00\x00\x00")},
};
static const struct cua_req_graph_set_args q_gsetargs = {GRAPH, 1, q_gnewargs, 4};
static const struct cua_req_graph_destroy q_gdestroy = {GRAPH};
static const struct cua_req_event_create q_ecreate = {0, 0};
static const struct cua_req_event_stream q_erecord_a = {EVENT_A, CUA_STREAM_ORDERED_ID};
static const struct cua_req_event_stream q_erecord_b = {EVENT_B, CUA_STREAM_ORDERED_ID};
static const struct cua_req_event q_event_a = {EVENT_A};
static const struct cua_req_event q_event_b = {EVENT_B};
static const struct cua_req_event_elapsed q_elapsed = {EVENT_A, EVENT_B};

/* ------------------------------------------------------------------ reply bodies */

/* the session's fd channel secret (PROTOCOL.md §9): 32 random bytes in a real reply */
static const struct cua_rep_hello p_hello = {1,
					     7,
					     BYTES("cuasyncd 0.1.0"),
					     (64u << 20) + (1u << 20),
					     CUA_MAX_BATCH,
					     CUA_MAX_ARGS,
					     1,
					     BYTES("0123456789abcdef0123456789abcdef")};
static cua_wire_device p_dev[] = {
	{0, BYTES("cuasync emulated device 0"), 8, 0, 1ull << 30, 4, 0, -5, BYTES("emu"), 1, 32764, 166912, 0, 1},
};
static const struct cua_rep_devices p_devices = {p_dev, 1};
static const struct cua_rep_module_load p_mload = {MODULE};
static cua_param_info p_params[] = {{0, 4}, {8, 8}, {16, 8}, {24, 8}};
static const struct cua_rep_function_get p_fget = {FUNCTION, p_params, 4};
static const struct cua_rep_mem_alloc p_alloc = {PTR_X};
static const struct cua_rep_stream_create p_screate = {STREAM};
static const struct cua_rep_memcpy_dtoh p_dtoh = {BYTES(Y_BYTES)};
static const struct cua_rep_host_register p_hreg = {BUFFER};
static const struct cua_rep_module_get_global p_gglobal = {PTR_G, 16};
static const struct cua_rep_func_get_attribute p_getattr = {65536};
static const struct cua_rep_occupancy p_occ = {2};
static const struct cua_rep_event_create p_ecreate_a = {EVENT_A};
static const struct cua_rep_event_create p_ecreate_b = {EVENT_B};
static const struct cua_rep_event_query p_equery = {1};
static const struct cua_rep_event_elapsed p_elapsed = {0x3c4ccccdu}; /* 0.0125f */
#define RESULT_OK                                                                                                      \
	{                                                                                                              \
		CUA_OK, BYTES("OK"), BYTES("success"),                                                                 \
		{                                                                                                      \
			NULL, 0                                                                                        \
		}                                                                                                      \
	}
static cua_item_result p_results[] = {
	RESULT_OK, RESULT_OK, RESULT_OK, {CUA_OK, BYTES("OK"), BYTES("success"), BYTES(Y_BYTES)}, RESULT_OK,
};
static const struct cua_rep_batch p_batch = {p_results, 5};
static cua_wire_dev_status p_devstat[] = {{0, 1, 0, 0, 0, 0}};
static const struct cua_rep_status p_status = {5230, 1, 41, 0, p_devstat, 1, {0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0}, 0};
static cua_wire_session p_session_rows[] = {
	{7, BYTES("example-client"), 4242, 4242, 5230, 42, 0, 0, 0, 0, 0, 0, BYTES("default"), 0}};
static const struct cua_rep_sessions p_sessions = {p_session_rows, 1};
static const struct cua_req_disconnect q_disconnect = {9};
static const struct cua_req_drain q_drain = {0, 1};
static const struct cua_rep_drain p_drain = {2, 5};
static const cua_wire_kv q_tenant_kv[] = {{{"uid", 3}, {"1000", 4}}, {{"mem", 3}, {"2G", 2}}};
static const struct cua_req_tenant q_tenant_add = {{"job-1234", 8}, (cua_wire_kv *)q_tenant_kv, 2, 0};
static const struct cua_rep_tenant_add p_tenant_add = {{"", 0}};
static const cua_wire_kv q_tenant_set_kv[] = {{{"weight", 6}, {"2", 1}}};
static const struct cua_req_tenant q_tenant_set = {{"job-1234", 8}, (cua_wire_kv *)q_tenant_set_kv, 1, 0};
static const struct cua_req_tenant q_tenant_remove = {{"job-1234", 8}, NULL, 0, CUA_TENANT_DRAIN};
static const cua_wire_kv p_tenant_limits[] = {{{"mem", 3}, {"2147483648", 10}}, {{"weight", 6}, {"2", 1}}};
static const cua_wire_tenant p_tenant_rows[] =
	{{{"default", 7}, {"file", 4}, {"", 0}, NULL, 0, 0, 0, 0, 0},
	 {{"job-1234", 8}, {"runtime", 7}, {"uid 1000", 8}, (cua_wire_kv *)p_tenant_limits, 2, 0, 1, 1048576, 1}};
static const struct cua_rep_tenant_list p_tenant_list = {(cua_wire_tenant *)p_tenant_rows, 2};

/* ------------------------------------------------------------------ the table */

#define REQ(file, op, seq, body, comment)                                                                              \
	{                                                                                                              \
		file, 0, CUA_OP_##op, seq, 0, NULL, body, comment                                                      \
	}
#define REP(file, op, body, comment)                                                                                   \
	{                                                                                                              \
		file, 1, CUA_OP_##op, 0, CUA_OK, NULL, body, comment                                                   \
	}
#define ERR(file, op, status, message, comment)                                                                        \
	{                                                                                                              \
		file, 1, op, 0, status, message, NULL, comment                                                         \
	}

/* clang-format off */
const struct vec_row vec_rows[] = {
	REQ("req_hello", HELLO, 0, &q_hello, "unordered (seq 0); offers versions 1..1"),
	REP("rep_hello", HELLO, &p_hello, "version 1, session 7, max_message 65 MiB, one device"),
	REQ("req_ping", PING, 0, &q_ping, "unordered (seq 0)"),
	REP("rep_ping", PING, &q_ping, "the nonce echoed"),
	REQ("req_devices", DEVICES, 1, NULL, "the session's first ordered request"),
	REP("rep_devices", DEVICES, &p_devices, "one emulated device, sm_80 (--emu-sm 80), 1 GiB, generation 1"),
	REQ("req_module_load", MODULE_LOAD, 2, &q_mload, "format 4: an emulated-device image naming the kernel axpy"),
	REP("rep_module_load", MODULE_LOAD, &p_mload, "module handle: kind 1, device 0, generation 1, tag 5a01, slot 0"),
	REQ("req_function_get", FUNCTION_GET, 3, &q_fget, "kernel axpy of that module"),
	REP("rep_function_get", FUNCTION_GET, &p_fget, "function handle; params a: 4 bytes, x, y: pointers, n: 8 bytes"),
	REQ("req_mem_alloc", MEM_ALLOC, 4, &q_alloc, "1 MiB on device 0"),
	REP("rep_mem_alloc", MEM_ALLOC, &p_alloc, "the device address of the allocation"),
	REQ("req_stream_create", STREAM_CREATE, 5, &q_screate, "device 0, priority 0, flags 0"),
	REP("rep_stream_create", STREAM_CREATE, &p_screate, "stream handle"),
	REQ("req_memcpy_htod", MEMCPY_HTOD, 6, &q_htod, "x = 1.0f, 2.0f, 3.0f, 4.0f (16 bytes) on the stream"),
	REP("rep_memcpy_htod", MEMCPY_HTOD, NULL, "the data has moved"),
	REQ("req_memset", MEMSET, 7, &q_memset, "y = four 32-bit words of 0x3f800000 (1.0f)"),
	REP("rep_memset", MEMSET, NULL, "done"),
	REQ("req_launch", LAUNCH, 8, &q_launch, "axpy<<<1, 4>>>(2.0f, x, y, 4) on the stream, waiting for completion"),
	REP("rep_launch", LAUNCH, NULL, "the kernel has completed"),
	REQ("req_memcpy_dtoh", MEMCPY_DTOH, 9, &q_dtoh, "read back y (16 bytes)"),
	REP("rep_memcpy_dtoh", MEMCPY_DTOH, &p_dtoh, "y = 3.0f, 5.0f, 7.0f, 9.0f"),
	REQ("req_memcpy_dtod", MEMCPY_DTOD, 10, &q_dtod, "copy y to z, 4 KiB further"),
	REP("rep_memcpy_dtod", MEMCPY_DTOD, NULL, "done"),
	REQ("req_host_register", HOST_REGISTER, 11, &q_hreg, "the client's sealed memfd, passed over the fd channel as ticket 3, 2 MiB, device 0"),
	REP("rep_host_register", HOST_REGISTER, &p_hreg, "host buffer handle"),
	REQ("req_memcpy_htod_host", MEMCPY_HTOD_HOST, 12, &q_htod_host, "16 bytes from buffer offset 0 to x"),
	REP("rep_memcpy_htod_host", MEMCPY_HTOD_HOST, NULL, "the data has moved (no data in the message)"),
	REQ("req_memcpy_dtoh_host", MEMCPY_DTOH_HOST, 13, &q_dtoh_host, "16 bytes of y to buffer offset 4096"),
	REP("rep_memcpy_dtoh_host", MEMCPY_DTOH_HOST, NULL, "the data is in the buffer (no data in the message)"),
	REQ("req_batch", BATCH, 14, &q_batch, "5 items: HTOD_HOST x, MEMSET y, LAUNCH axpy (cooperative, priority -2), DTOH y, DTOD y to z"),
	REP("rep_batch", BATCH, &p_batch, "5 results in item order; the DTOH item's result carries y"),
	REQ("req_stream_sync", STREAM_SYNC, 15, &q_stream, "wait for the stream"),
	REP("rep_stream_sync", STREAM_SYNC, NULL, "the stream is idle"),
	REQ("req_synchronize", SYNCHRONIZE, 16, NULL, "wait for all of the session's work"),
	REP("rep_synchronize", SYNCHRONIZE, NULL, "no fire-and-forget request failed"),
	REQ("req_host_unregister", HOST_UNREGISTER, 17, &q_hunreg, "release the host buffer"),
	REP("rep_host_unregister", HOST_UNREGISTER, NULL, "released"),
	REQ("req_stream_destroy", STREAM_DESTROY, 18, &q_stream, "destroy the stream"),
	REP("rep_stream_destroy", STREAM_DESTROY, NULL, "destroyed"),
	REQ("req_graph_create", GRAPH_CREATE, 19, &q_gcreate,
	    "a graph of 3 nodes: y = 0, axpy(1.0f, x, y, 4), z = y (nodes name stream 0)"),
	REP("rep_graph_create", GRAPH_CREATE, &p_gcreate, "graph handle: kind 6, in the stream's old slot; 3 nodes"),
	REQ("req_graph_launch", GRAPH_LAUNCH, 20, &q_glaunch, "run it on the ordered stream, waiting for it"),
	REP("rep_graph_launch", GRAPH_LAUNCH, NULL, "the graph has completed: z = x"),
	REQ("req_graph_set_args", GRAPH_SET_ARGS, 21, &q_gsetargs, "node 1 (the axpy) gets a = 2.0f"),
	REP("rep_graph_set_args", GRAPH_SET_ARGS, NULL, "later launches compute z = 2·x"),
	REQ("req_graph_destroy", GRAPH_DESTROY, 22, &q_gdestroy, "destroy it (x and y may be freed then)"),
	REP("rep_graph_destroy", GRAPH_DESTROY, NULL, "destroyed"),
	REQ("req_mem_free", MEM_FREE, 23, &q_free, "free the allocation"),
	REP("rep_mem_free", MEM_FREE, NULL, "freed"),
	REQ("req_module_get_global", MODULE_GET_GLOBAL, 24, &q_gglobal, "the module's global coeffs"),
	REP("rep_module_get_global", MODULE_GET_GLOBAL, &p_gglobal, "its device address (before x) and 16 bytes"),
	REQ("req_func_set_attribute", FUNC_SET_ATTRIBUTE, 25, &q_setattr,
	    "axpy's MAX_DYNAMIC_SHARED_SIZE_BYTES (8) = 64 KiB"),
	REP("rep_func_set_attribute", FUNC_SET_ATTRIBUTE, NULL, "set: later launches may use 64 KiB"),
	REQ("req_func_get_attribute", FUNC_GET_ATTRIBUTE, 26, &q_getattr, "axpy's MAX_DYNAMIC_SHARED_SIZE_BYTES (8)"),
	REP("rep_func_get_attribute", FUNC_GET_ATTRIBUTE, &p_getattr, "65536, as set"),
	REQ("req_occupancy", OCCUPANCY, 27, &q_occ, "axpy with 256 threads and 64 KiB of dynamic shared memory"),
	REP("rep_occupancy", OCCUPANCY, &p_occ, "2 blocks per multiprocessor (166912 bytes of shared memory on sm_80)"),
	REQ("req_event_create", EVENT_CREATE, 28, &q_ecreate, "an event on device 0 with timing (flags 0); a second one follows (seq 29)"),
	REP("rep_event_create", EVENT_CREATE, &p_ecreate_a, "event handle: kind 5, the graph's old slot 2 with its next tag"),
	REQ("req_event_create_b", EVENT_CREATE, 29, &q_ecreate, "the second event"),
	REP("rep_event_create_b", EVENT_CREATE, &p_ecreate_b, "event handle in the host buffer's old slot 3"),
	REQ("req_event_record", EVENT_RECORD, 30, &q_erecord_a, "record the first event on the ordered stream (1); the second follows (seq 31)"),
	REP("rep_event_record", EVENT_RECORD, NULL, "enqueued (not necessarily reached)"),
	REQ("req_event_record_b", EVENT_RECORD, 31, &q_erecord_b, "record the second event on the ordered stream"),
	REP("rep_event_record_b", EVENT_RECORD, NULL, "enqueued"),
	REQ("req_stream_wait_event", STREAM_WAIT_EVENT, 32, &q_erecord_a, "[stream, event]: the ordered stream's later work waits for the first event"),
	REP("rep_stream_wait_event", STREAM_WAIT_EVENT, NULL, "enqueued"),
	REQ("req_event_sync", EVENT_SYNC, 33, &q_event_b, "wait until the second event's record is reached"),
	REP("rep_event_sync", EVENT_SYNC, NULL, "reached"),
	REQ("req_event_query", EVENT_QUERY, 34, &q_event_a, "has the first event's record been reached?"),
	REP("rep_event_query", EVENT_QUERY, &p_equery, "ready 1"),
	REQ("req_event_elapsed", EVENT_ELAPSED, 35, &q_elapsed, "milliseconds from the first event's record to the second's"),
	REP("rep_event_elapsed", EVENT_ELAPSED, &p_elapsed, "ms_bits 0x3c4ccccd: 0.0125 ms as IEEE-754 binary32 bits"),
	REQ("req_event_destroy", EVENT_DESTROY, 36, &q_event_a, "destroy the first event (the second goes with the session)"),
	REP("rep_event_destroy", EVENT_DESTROY, NULL, "released"),
	REQ("req_module_unload", MODULE_UNLOAD, 37, &q_munload, "unload the module (and its global)"),
	REP("rep_module_unload", MODULE_UNLOAD, NULL, "unloaded"),
	REQ("req_status", STATUS, 0, NULL, "unordered (seq 0)"),
	REP("rep_status", STATUS, &p_status, "uptime 5.2 s, 1 session, 41 requests, 0 errors; nothing left allocated"),
	REQ("req_sessions", SESSIONS, 0, NULL, "unordered (seq 0)"),
	REP("rep_sessions", SESSIONS, &p_sessions, "a client's view: its own session 7, pid 4242 (the kernel agrees), 42 requests"),
	REQ("req_disconnect", DISCONNECT, 0, &q_disconnect, "on the operator endpoint: close session 9's connection"),
	REP("rep_disconnect", DISCONNECT, NULL, "its connection is being closed"),
	REQ("req_drain", DRAIN, 0, &q_drain, "on the operator endpoint: device 0 takes no new objects"),
	REP("rep_drain", DRAIN, &p_drain, "2 sessions still hold objects on it, 5 requests are in its workers"),
	REQ("req_tenant_add", TENANT_ADD, 0, &q_tenant_add, "on the operator endpoint: tenant job-1234 for uid 1000, 2 GiB of device memory"),
	REP("rep_tenant_add", TENANT_ADD, &p_tenant_add, "added; no one-off token was asked for (flags 0)"),
	REQ("req_tenant_set", TENANT_SET, 0, &q_tenant_set, "on the operator endpoint: job-1234's weight becomes 2"),
	REP("rep_tenant_set", TENANT_SET, NULL, "its sessions have the new limits at once"),
	REQ("req_tenant_list", TENANT_LIST, 0, NULL, "on the operator endpoint"),
	REP("rep_tenant_list", TENANT_LIST, &p_tenant_list, "default, and job-1234 with one session holding 1 MiB and a stream"),
	REQ("req_tenant_remove", TENANT_REMOVE, 0, &q_tenant_remove, "on the operator endpoint: job-1234 drains (flags 1)"),
	REP("rep_tenant_remove", TENANT_REMOVE, NULL, "it takes nothing new and goes when its session ends"),

	/* An error reply of each family of status codes; the body is always []. */
	ERR("rep_error_protocol", 0, CUA_EPROTOCOL, "message: expected an array of 4 elements",
	    "decoding: a message that is not a request; op 0, since none could be read"),
	ERR("rep_error_version", CUA_OP_HELLO, CUA_EVERSION,
	    "protocol version 2 is not supported; this side speaks 1..1", "decoding: a request of version 2"),
	ERR("rep_error_unknown_op", 200, CUA_EUNKNOWN_OP, "unknown op 200",
	    "decoding: op 200 (a newer client) is echoed though this daemon does not know it"),
	ERR("rep_error_too_large", CUA_OP_FUNCTION_GET, CUA_ETOO_LARGE,
	    "FUNCTION_GET.name: 1100 bytes exceed the limit of 1024", "decoding: a value over a limit"),
	ERR("rep_error_no_session", CUA_OP_DEVICES, CUA_ENO_SESSION, "send HELLO first",
	    "session: a request before HELLO"),
	ERR("rep_error_unauthenticated", CUA_OP_HELLO, CUA_EUNAUTHENTICATED,
	    "the token is not one of the daemon's --token-file: check $CUASYNC_TOKEN or $CUASYNC_TOKEN_FILE (the token "
	    "was not logged)",
	    "session: a HELLO whose token the daemon does not know"),
	ERR("rep_error_bad_argument", CUA_OP_LAUNCH, CUA_EBAD_ARGUMENT,
	    "argument 3 is 4 bytes, the kernel's parameter 3 is 8 bytes",
	    "arguments: axpy's n passed as 4 bytes"),
	ERR("rep_error_not_found", CUA_OP_MODULE_UNLOAD, CUA_ENOT_FOUND,
	    "module handle 0x1000015a01000000 is not an object of this session",
	    "arguments: the module unloaded a second time"),
	ERR("rep_error_quota", CUA_OP_MEM_ALLOC, CUA_EQUOTA,
	    "allocating 2147483648 bytes would pass the session's memory quota of 1073741824 (1048576 in use)",
	    "resources: a per-session limit"),
	ERR("rep_error_busy", CUA_OP_MEM_FREE, CUA_EBUSY,
	    "0x1001000000100 is used by node 1 of graph 0x60000197e0000002: destroy the graph first "
	    "(cua_graph_destroy), then free the memory",
	    "resources: memory a live graph's node uses"),
	ERR("rep_error_context_lost", CUA_OP_STREAM_SYNC, CUA_ECONTEXT_LOST,
	    "stream handle 0x30000197df000002 belongs to a GPU context that was lost (device 0 restarted); "
	    "recreate it", "device: a handle of a worker generation that is gone"),
	ERR("rep_error_device", CUA_OP_LAUNCH, CUA_EDEVICE,
	    "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered at 0x1001000100000",
	    "device: the kernel faulted; the message starts with the CUDA error name"),
	ERR("rep_error_pdl", CUA_OP_LAUNCH, CUA_EPDL_UNSUPPORTED,
	    "programmatic dependent launch requires sm_90 or newer; target sm_80",
	    "device: a LAUNCH with flags bit 0 (PDL) on the sm_80 device"),
	ERR("rep_error_module", CUA_OP_MODULE_LOAD, CUA_EMODULE,
	    "emulated device: not an emulated-device image: the first line must be 'cuasync-emu-module'",
	    "device: the image was rejected (format 4 without its header line); the message is the loader's log"),
	ERR("rep_error_unsupported", CUA_OP_HOST_REGISTER, CUA_EUNSUPPORTED,
	    "shared host memory needs a local ipc:// connection (its memfd is passed over the fd channel beside the "
	    "ipc:// socket)", "capability: HOST_REGISTER over tcp://"),
};
/* clang-format on */
const size_t vec_nrows = sizeof(vec_rows) / sizeof(vec_rows[0]);

/* ------------------------------------------------------------------ encoding */

int
vec_pack(const struct vec_row *r, cua_wbuf *b)
{
	if (r->is_reply)
		return cua_wire_pack_reply(cua_wbuf_out(b), r->op, r->status, r->message, r->body);
	return cua_wire_pack_request(cua_wbuf_out(b), r->op, r->seq, r->body);
}

/* The first comment line: "# request HELLO, protocol v1, seq 0" or "# reply LAUNCH, protocol v1, status 9". */
static int
head_line(const struct vec_row *r, char *buf, size_t size)
{
	const char *name = cua_op_name(r->op);
	char opbuf[32];
	if (name == NULL) {
		snprintf(opbuf, sizeof(opbuf), "op %u", r->op);
		name = opbuf;
	}
	if (r->is_reply)
		return snprintf(buf, size, "# reply %s, protocol v%u, status %u %s\n# %s\n", name, CUA_PROTO_VERSION,
				r->status, cua_strerror_name((int)r->status), r->comment);
	return snprintf(buf, size, "# request %s, protocol v%u, seq %llu\n# %s\n", name, CUA_PROTO_VERSION,
			(unsigned long long)r->seq, r->comment);
}

char *
vec_text(const struct vec_row *r)
{
	cua_wbuf b = {0};
	char *text = NULL;
	char head[512];
	int hl = head_line(r, head, sizeof(head));
	if (hl < 0 || (size_t)hl >= sizeof(head) || vec_pack(r, &b) != 0)
		goto out;
	text = malloc((size_t)hl + b.len * 3 + 1);
	if (text == NULL)
		goto out;
	memcpy(text, head, (size_t)hl);
	char *p = text + hl;
	for (size_t k = 0; k < b.len; k++) {
		sprintf(p, "%02x%c", (unsigned char)b.data[k], (k % 32 == 31 || k + 1 == b.len) ? '\n' : ' ');
		p += 3;
	}
	*p = '\0';
out:
	cua_wbuf_free(&b);
	return text;
}
