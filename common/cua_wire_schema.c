/*
 * cua_wire_schema.c — the wire protocol's message bodies as tables (proto/PROTOCOL.md §4): one schema per body,
 * one row per op, the op names, and the introspection the conformance suite compares PROTOCOL.md with. The
 * codec that walks them is common/cua_wire.c.
 */
#include "config.h"

#include "cua_fdchan.h"
#include "cua_wire.h"
#include "cua_wire_schema.h"

#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------ op names */

const char *
cua_op_name(uint32_t op)
{
	switch (op) {
#define CUA_X_OPNAME(name, value)                                                                                      \
	case value: return #name;
		CUA_OP_TABLE(CUA_X_OPNAME)
#undef CUA_X_OPNAME
	}
	return NULL;
}

/* ------------------------------------------------------------------ schemas */

/* The schema tables read as tables: */
/* clang-format off */
#define U32(st, m, mx) {#m, F_U32, offsetof(st, m), 0, (mx), NULL, 0}
#define U64(st, m) {#m, F_U64, offsetof(st, m), 0, UINT64_MAX, NULL, 0}
#define U64N(st, m, label) {label, F_U64, offsetof(st, m), 0, UINT64_MAX, NULL, 0}
#define I32(st, m) {#m, F_I32, offsetof(st, m), 0, 0, NULL, 0}
#define STR(st, m, mx) {#m, F_STR, offsetof(st, m), 0, (mx), NULL, 0}
#define BIN(st, m, mx) {#m, F_BIN, offsetof(st, m), 0, (mx), NULL, 0}
#define DIM3(st, m) {#m, F_DIM3, offsetof(st, m), 0, UINT32_MAX, NULL, 0}
#define ARR(st, m, n, mx, sch, et) {#m, F_ARRAY, offsetof(st, m), offsetof(st, n), (mx), &(sch), sizeof(et)}
#define ARGS(st, m, n, mx) {#m, F_ARRAY, offsetof(st, m), offsetof(st, n), (mx), NULL, sizeof(cua_wire_arg)}
#define NESTED(st, m, sch) {#m, F_STRUCT, offsetof(st, m), 0, 0, &(sch), 0}
#define SCHEMA(var, label, ...)                                                                              \
	static const struct field var##_fields[] = {__VA_ARGS__};                                            \
	static const struct schema var = {label, sizeof(var##_fields) / sizeof(var##_fields[0]), var##_fields, 0, 0}
/* The same with fields past nreq optional (from the end); count: the struct's uint32_t count of them. */
#define SCHEMA_OPT(var, label, nreq, count, ...)                                                             \
	static const struct field var##_fields[] = {__VA_ARGS__};                                            \
	static const struct schema var = {label, sizeof(var##_fields) / sizeof(var##_fields[0]), var##_fields, \
					  (nreq), (count)}

const struct schema cua_wire_empty_schema = {"empty", 0, NULL};
#define BYTES_MAX UINT32_MAX

SCHEMA(s_req_hello, "HELLO", U32(struct cua_req_hello, min_version, UINT32_MAX),
       U32(struct cua_req_hello, max_version, UINT32_MAX), STR(struct cua_req_hello, client, CUA_MAX_IDENT),
       U32(struct cua_req_hello, pid, UINT32_MAX), STR(struct cua_req_hello, token, CUA_MAX_TOKEN));
SCHEMA(s_rep_hello, "HELLO reply", U32(struct cua_rep_hello, version, UINT32_MAX), U64(struct cua_rep_hello, session),
       STR(struct cua_rep_hello, server, CUA_MAX_IDENT), U64(struct cua_rep_hello, max_message),
       U32(struct cua_rep_hello, max_batch, UINT32_MAX), U32(struct cua_rep_hello, max_args, UINT32_MAX),
       U32(struct cua_rep_hello, devices, CUA_MAX_DEVICES), BIN(struct cua_rep_hello, fd_secret, CUA_FDCHAN_SECRET));
SCHEMA(s_ping, "PING", U64(struct cua_req_ping, nonce));
SCHEMA(s_dev_attr, "device attribute", U32(cua_wire_dev_attr, id, UINT32_MAX), I32(cua_wire_dev_attr, value));
SCHEMA_OPT(s_device_info, "device", 14, offsetof(cua_wire_device, nfields),
       U32(cua_wire_device, index, CUA_MAX_DEVICES), STR(cua_wire_device, name, 256),
       U32(cua_wire_device, sm_major, 255), U32(cua_wire_device, sm_minor, 255), U64(cua_wire_device, total_mem),
       U32(cua_wire_device, multiprocessors, UINT32_MAX), I32(cua_wire_device, prio_least),
       I32(cua_wire_device, prio_greatest), STR(cua_wire_device, backend, CUA_MAX_IDENT),
       U32(cua_wire_device, generation, UINT32_MAX), U32(cua_wire_device, max_param_bytes, CUA_MAX_PARAM_BYTES),
       U32(cua_wire_device, max_shared_optin, UINT32_MAX), U32(cua_wire_device, cluster_launch, 1),
       U32(cua_wire_device, cooperative_launch, 1),
       ARR(cua_wire_device, attrs, nattrs, CUA_MAX_DEV_ATTRS, s_dev_attr, cua_wire_dev_attr));
SCHEMA(s_rep_devices, "DEVICES reply",
       ARR(struct cua_rep_devices, devices, ndevices, CUA_MAX_DEVICES, s_device_info, cua_wire_device));
SCHEMA(s_req_module_load, "MODULE_LOAD", U32(struct cua_req_module_load, device, CUA_MAX_DEVICES - 1),
       U32(struct cua_req_module_load, format, CUA_IMAGE_EMU), BIN(struct cua_req_module_load, image, BYTES_MAX));
SCHEMA(s_rep_module_load, "MODULE_LOAD reply", U64(struct cua_rep_module_load, module));
SCHEMA(s_req_module_unload, "MODULE_UNLOAD", U64(struct cua_req_module_unload, module));
SCHEMA(s_req_function_get, "FUNCTION_GET", U64(struct cua_req_function_get, module),
       STR(struct cua_req_function_get, name, CUA_MAX_NAME));
SCHEMA(s_param_info, "param", U32(cua_param_info, offset, CUA_MAX_PARAM_BYTES),
       U32(cua_param_info, size, CUA_MAX_PARAM_BYTES));
SCHEMA(s_rep_function_get, "FUNCTION_GET reply", U64(struct cua_rep_function_get, function),
       ARR(struct cua_rep_function_get, params, nparams, CUA_MAX_PARAMS, s_param_info, cua_param_info));
SCHEMA(s_req_mem_alloc, "MEM_ALLOC", U32(struct cua_req_mem_alloc, device, CUA_MAX_DEVICES - 1),
       U64(struct cua_req_mem_alloc, bytes));
SCHEMA(s_rep_mem_alloc, "MEM_ALLOC reply", U64(struct cua_rep_mem_alloc, ptr));
SCHEMA(s_req_mem_free, "MEM_FREE", U64(struct cua_req_mem_free, ptr));
SCHEMA(s_req_htod, "MEMCPY_HTOD", U64(struct cua_req_memcpy_htod, dst), U64(struct cua_req_memcpy_htod, stream),
       BIN(struct cua_req_memcpy_htod, data, BYTES_MAX));
SCHEMA(s_req_dtoh, "MEMCPY_DTOH", U64(struct cua_req_memcpy_dtoh, src), U64(struct cua_req_memcpy_dtoh, bytes),
       U64(struct cua_req_memcpy_dtoh, stream));
SCHEMA(s_rep_dtoh, "MEMCPY_DTOH reply", BIN(struct cua_rep_memcpy_dtoh, data, BYTES_MAX));
SCHEMA(s_req_dtod, "MEMCPY_DTOD", U64(struct cua_req_memcpy_dtod, dst), U64(struct cua_req_memcpy_dtod, src),
       U64(struct cua_req_memcpy_dtod, bytes), U64(struct cua_req_memcpy_dtod, stream));
SCHEMA(s_req_memset, "MEMSET", U64(struct cua_req_memset, dst), U32(struct cua_req_memset, value, UINT32_MAX),
       U32(struct cua_req_memset, width, 4), U64(struct cua_req_memset, count), U64(struct cua_req_memset, stream));
SCHEMA(s_req_stream_create, "STREAM_CREATE", U32(struct cua_req_stream_create, device, CUA_MAX_DEVICES - 1),
       I32(struct cua_req_stream_create, priority), U32(struct cua_req_stream_create, flags, 0));
SCHEMA(s_rep_stream_create, "STREAM_CREATE reply", U64(struct cua_rep_stream_create, stream));
SCHEMA(s_req_stream, "STREAM", U64(struct cua_req_stream, stream));
SCHEMA_OPT(s_req_launch, "LAUNCH", CUA_LAUNCH_FIELDS, offsetof(struct cua_req_launch, nfields),
       U64(struct cua_req_launch, function), DIM3(struct cua_req_launch, grid),
       DIM3(struct cua_req_launch, block), U32(struct cua_req_launch, shared_mem, UINT32_MAX),
       U64(struct cua_req_launch, stream), U32(struct cua_req_launch, flags, CUA_LAUNCH_FLAGS_ALL),
       ARGS(struct cua_req_launch, args, nargs, CUA_MAX_ARGS), DIM3(struct cua_req_launch, cluster),
       I32(struct cua_req_launch, priority));

SCHEMA(s_req_host_register, "HOST_REGISTER", U32(struct cua_req_host_register, device, CUA_MAX_DEVICES - 1),
       U64(struct cua_req_host_register, ticket), U64(struct cua_req_host_register, bytes));
SCHEMA(s_rep_host_register, "HOST_REGISTER reply", U64(struct cua_rep_host_register, buffer));
SCHEMA(s_req_host_unregister, "HOST_UNREGISTER", U64(struct cua_req_host_unregister, buffer));
/* One struct for both directions; the wire names its device pointer as PROTOCOL.md does (dst, src). */
SCHEMA(s_req_htod_host, "MEMCPY_HTOD_HOST", U64N(struct cua_req_memcpy_host, dev_ptr, "dst"),
       U64(struct cua_req_memcpy_host, stream), U64(struct cua_req_memcpy_host, buffer),
       U64(struct cua_req_memcpy_host, offset), U64(struct cua_req_memcpy_host, bytes));
SCHEMA(s_req_dtoh_host, "MEMCPY_DTOH_HOST", U64N(struct cua_req_memcpy_host, dev_ptr, "src"),
       U64(struct cua_req_memcpy_host, stream), U64(struct cua_req_memcpy_host, buffer),
       U64(struct cua_req_memcpy_host, offset), U64(struct cua_req_memcpy_host, bytes));

SCHEMA(s_req_get_global, "MODULE_GET_GLOBAL", U64(struct cua_req_module_get_global, module),
       STR(struct cua_req_module_get_global, name, CUA_MAX_GLOBAL_NAME));
SCHEMA(s_rep_get_global, "MODULE_GET_GLOBAL reply", U64(struct cua_rep_module_get_global, ptr),
       U64(struct cua_rep_module_get_global, bytes));
SCHEMA(s_req_get_attr, "FUNC_GET_ATTRIBUTE", U64(struct cua_req_func_attribute, function),
       U32(struct cua_req_func_attribute, attribute, CUA_FATTR_LAST));
SCHEMA(s_rep_get_attr, "FUNC_GET_ATTRIBUTE reply", I32(struct cua_rep_func_get_attribute, value));
SCHEMA(s_req_set_attr, "FUNC_SET_ATTRIBUTE", U64(struct cua_req_func_attribute, function),
       U32(struct cua_req_func_attribute, attribute, CUA_FATTR_LAST), I32(struct cua_req_func_attribute, value));
SCHEMA(s_req_occupancy, "OCCUPANCY", U64(struct cua_req_occupancy, function),
       U32(struct cua_req_occupancy, block_size, UINT32_MAX), U32(struct cua_req_occupancy, shared_mem, UINT32_MAX));
SCHEMA(s_rep_occupancy, "OCCUPANCY reply", U32(struct cua_rep_occupancy, blocks, UINT32_MAX));
SCHEMA(s_req_event_create, "EVENT_CREATE", U32(struct cua_req_event_create, device, CUA_MAX_DEVICES - 1),
       U32(struct cua_req_event_create, flags, CUA_EVENT_FLAGS_ALL));
SCHEMA(s_rep_event_create, "EVENT_CREATE reply", U64(struct cua_rep_event_create, event));
SCHEMA(s_req_event, "EVENT", U64(struct cua_req_event, event));
SCHEMA(s_req_event_record, "EVENT_RECORD", U64(struct cua_req_event_stream, event),
       U64(struct cua_req_event_stream, stream));
SCHEMA(s_req_stream_wait_event, "STREAM_WAIT_EVENT", U64(struct cua_req_event_stream, stream),
       U64(struct cua_req_event_stream, event));
SCHEMA(s_req_event_elapsed, "EVENT_ELAPSED", U64(struct cua_req_event_elapsed, start),
       U64(struct cua_req_event_elapsed, end));
SCHEMA(s_rep_event_elapsed, "EVENT_ELAPSED reply", U32(struct cua_rep_event_elapsed, ms_bits, UINT32_MAX));
SCHEMA(s_rep_event_query, "EVENT_QUERY reply", U32(struct cua_rep_event_query, ready, 1));

static const struct ucase batch_cases[] = {
	{CUA_OP_LAUNCH, &s_req_launch},   {CUA_OP_MEMCPY_HTOD, &s_req_htod}, {CUA_OP_MEMCPY_DTOH, &s_req_dtoh},
	{CUA_OP_MEMCPY_DTOD, &s_req_dtod}, {CUA_OP_MEMSET, &s_req_memset},
	{CUA_OP_MEMCPY_HTOD_HOST, &s_req_htod_host}, {CUA_OP_MEMCPY_DTOH_HOST, &s_req_dtoh_host},
};
static const struct field s_batch_item_fields[] = {
	{"item", F_UNION, offsetof(cua_batch_item, kind), offsetof(cua_batch_item, u), 0, batch_cases,
	 sizeof(batch_cases) / sizeof(batch_cases[0])},
};
/* A union is one field that is itself the [kind, body] array. */
static const struct schema s_batch_item = {"batch item", 1, s_batch_item_fields};
SCHEMA(s_req_batch, "BATCH", U32(struct cua_req_batch, flags, CUA_FLAG_NO_WAIT),
       ARR(struct cua_req_batch, items, nitems, CUA_MAX_BATCH, s_batch_item, cua_batch_item));
SCHEMA(s_item_result, "result", U32(cua_item_result, status, UINT32_MAX),
       STR(cua_item_result, name, CUA_MAX_IDENT), STR(cua_item_result, message, CUA_MAX_MESSAGE_TEXT),
       BIN(cua_item_result, data, BYTES_MAX));
SCHEMA(s_rep_batch, "BATCH reply",
       ARR(struct cua_rep_batch, results, nresults, CUA_MAX_BATCH, s_item_result, cua_item_result));
SCHEMA_OPT(s_dev_status, "device status", 6, offsetof(cua_wire_dev_status, nfields),
       U32(cua_wire_dev_status, index, CUA_MAX_DEVICES),
       U32(cua_wire_dev_status, generation, UINT32_MAX), U32(cua_wire_dev_status, restarts, UINT32_MAX),
       U32(cua_wire_dev_status, in_flight, UINT32_MAX), U64(cua_wire_dev_status, allocations), U64(cua_wire_dev_status, alloc_bytes),
       U32(cua_wire_dev_status, drained, 1));
SCHEMA(s_counts, "counts", U64(cua_wire_counts, allocations), U64(cua_wire_counts, alloc_bytes), U64(cua_wire_counts, modules),
       U64(cua_wire_counts, functions), U64(cua_wire_counts, streams), U64(cua_wire_counts, in_flight));
SCHEMA(s_rep_status, "STATUS reply", U64(struct cua_rep_status, uptime_ms),
       U32(struct cua_rep_status, sessions, UINT32_MAX), U64(struct cua_rep_status, requests),
       U64(struct cua_rep_status, errors),
       ARR(struct cua_rep_status, devices, ndevices, CUA_MAX_DEVICES, s_dev_status, cua_wire_dev_status),
       NESTED(struct cua_rep_status, session, s_counts), NESTED(struct cua_rep_status, total, s_counts),
       U32(struct cua_rep_status, insecure_listeners, UINT32_MAX));
SCHEMA_OPT(s_session_info, "session", 14, offsetof(cua_wire_session, nfields),
       U64(cua_wire_session, session), STR(cua_wire_session, client, CUA_MAX_IDENT),
       U32(cua_wire_session, pid, UINT32_MAX), U32(cua_wire_session, peer_pid, UINT32_MAX),
       U64(cua_wire_session, age_ms), U64(cua_wire_session, requests), U64(cua_wire_session, errors),
       U64(cua_wire_session, in_flight), U64(cua_wire_session, alloc_bytes), U64(cua_wire_session, streams),
       U64(cua_wire_session, modules), U32(cua_wire_session, operator, 1),
       STR(cua_wire_session, tenant, CUA_MAX_TENANT_NAME), U64(cua_wire_session, busy_ns),
       STR(cua_wire_session, transport, 16), U32(cua_wire_session, uid, UINT32_MAX),
       U32(cua_wire_session, gid, UINT32_MAX), STR(cua_wire_session, peer, CUA_MAX_PEER_ADDR),
       STR(cua_wire_session, token, 64));
SCHEMA(s_rep_sessions, "SESSIONS reply",
       ARR(struct cua_rep_sessions, sessions, nsessions, CUA_MAX_SESSIONS_LIST, s_session_info, cua_wire_session));
SCHEMA(s_req_disconnect, "DISCONNECT", U64(struct cua_req_disconnect, session));
SCHEMA(s_req_drain, "DRAIN", U32(struct cua_req_drain, device, CUA_MAX_DEVICES - 1), U32(struct cua_req_drain, drain, 1));
SCHEMA(s_rep_drain, "DRAIN reply", U32(struct cua_rep_drain, holding, UINT32_MAX), U32(struct cua_rep_drain, in_flight, UINT32_MAX));
SCHEMA(s_req_graph_create, "GRAPH_CREATE", U32(struct cua_req_graph_create, flags, 0),
       ARR(struct cua_req_graph_create, items, nitems, CUA_MAX_GRAPH_NODES, s_batch_item, cua_batch_item));
SCHEMA(s_rep_graph_create, "GRAPH_CREATE reply", U64(struct cua_rep_graph_create, graph),
       U32(struct cua_rep_graph_create, nodes, CUA_MAX_GRAPH_NODES));
SCHEMA(s_req_graph_launch, "GRAPH_LAUNCH", U64(struct cua_req_graph_launch, graph),
       U64(struct cua_req_graph_launch, stream), U32(struct cua_req_graph_launch, flags, CUA_FLAG_NO_WAIT));
SCHEMA(s_req_graph_destroy, "GRAPH_DESTROY", U64(struct cua_req_graph_destroy, graph));
SCHEMA(s_req_graph_set_args, "GRAPH_SET_ARGS", U64(struct cua_req_graph_set_args, graph),
       U32(struct cua_req_graph_set_args, node, CUA_MAX_GRAPH_NODES - 1),
       ARGS(struct cua_req_graph_set_args, args, nargs, CUA_MAX_ARGS));
SCHEMA(s_kv, "key/value", STR(cua_wire_kv, key, CUA_MAX_TENANT_KEY), STR(cua_wire_kv, value, CUA_MAX_TENANT_VALUE));
SCHEMA(s_req_tenant_add, "TENANT_ADD", STR(struct cua_req_tenant, name, CUA_MAX_TENANT_NAME),
       ARR(struct cua_req_tenant, kv, nkv, CUA_MAX_TENANT_KV, s_kv, cua_wire_kv),
       U32(struct cua_req_tenant, flags, CUA_TENANT_ONE_OFF_TOKEN));
SCHEMA(s_rep_tenant_add, "TENANT_ADD reply", STR(struct cua_rep_tenant_add, token, CUA_MAX_TOKEN));
SCHEMA(s_req_tenant_set, "TENANT_SET", STR(struct cua_req_tenant, name, CUA_MAX_TENANT_NAME),
       ARR(struct cua_req_tenant, kv, nkv, CUA_MAX_TENANT_KV, s_kv, cua_wire_kv));
SCHEMA(s_req_tenant_remove, "TENANT_REMOVE", STR(struct cua_req_tenant, name, CUA_MAX_TENANT_NAME),
       U32(struct cua_req_tenant, flags, CUA_TENANT_DRAIN));
SCHEMA(s_tenant_info, "tenant_info", STR(cua_wire_tenant, name, CUA_MAX_TENANT_NAME),
       STR(cua_wire_tenant, source, 16), STR(cua_wire_tenant, rule, CUA_MAX_TENANT_TEXT),
       ARR(cua_wire_tenant, limits, nlimits, CUA_MAX_TENANT_KV, s_kv, cua_wire_kv),
       U32(cua_wire_tenant, removing, 1), U32(cua_wire_tenant, sessions, UINT32_MAX),
       U64(cua_wire_tenant, mem_bytes), U64(cua_wire_tenant, streams));
SCHEMA(s_rep_tenant_list, "TENANT_LIST reply",
       ARR(struct cua_rep_tenant_list, tenants, ntenants, CUA_MAX_TENANT_LIST, s_tenant_info, cua_wire_tenant));

/* clang-format on */

/* One row per op: request body schema, reply body schema. */
const struct op_schema cua_wire_op_schemas[CUA_OP_MAX] = {
	[CUA_OP_HELLO] = {&s_req_hello, &s_rep_hello},
	[CUA_OP_PING] = {&s_ping, &s_ping},
	[CUA_OP_DEVICES] = {&cua_wire_empty_schema, &s_rep_devices},
	[CUA_OP_MODULE_LOAD] = {&s_req_module_load, &s_rep_module_load},
	[CUA_OP_MODULE_UNLOAD] = {&s_req_module_unload, &cua_wire_empty_schema},
	[CUA_OP_FUNCTION_GET] = {&s_req_function_get, &s_rep_function_get},
	[CUA_OP_MEM_ALLOC] = {&s_req_mem_alloc, &s_rep_mem_alloc},
	[CUA_OP_MEM_FREE] = {&s_req_mem_free, &cua_wire_empty_schema},
	[CUA_OP_MEMCPY_HTOD] = {&s_req_htod, &cua_wire_empty_schema},
	[CUA_OP_MEMCPY_DTOH] = {&s_req_dtoh, &s_rep_dtoh},
	[CUA_OP_MEMCPY_DTOD] = {&s_req_dtod, &cua_wire_empty_schema},
	[CUA_OP_MEMSET] = {&s_req_memset, &cua_wire_empty_schema},
	[CUA_OP_STREAM_CREATE] = {&s_req_stream_create, &s_rep_stream_create},
	[CUA_OP_STREAM_DESTROY] = {&s_req_stream, &cua_wire_empty_schema},
	[CUA_OP_STREAM_SYNC] = {&s_req_stream, &cua_wire_empty_schema},
	[CUA_OP_LAUNCH] = {&s_req_launch, &cua_wire_empty_schema},
	[CUA_OP_BATCH] = {&s_req_batch, &s_rep_batch},
	[CUA_OP_SYNCHRONIZE] = {&cua_wire_empty_schema, &cua_wire_empty_schema},
	[CUA_OP_STATUS] = {&cua_wire_empty_schema, &s_rep_status},
	[CUA_OP_HOST_REGISTER] = {&s_req_host_register, &s_rep_host_register},
	[CUA_OP_HOST_UNREGISTER] = {&s_req_host_unregister, &cua_wire_empty_schema},
	[CUA_OP_MEMCPY_HTOD_HOST] = {&s_req_htod_host, &cua_wire_empty_schema},
	[CUA_OP_MEMCPY_DTOH_HOST] = {&s_req_dtoh_host, &cua_wire_empty_schema},
	[CUA_OP_SESSIONS] = {&cua_wire_empty_schema, &s_rep_sessions},
	[CUA_OP_DISCONNECT] = {&s_req_disconnect, &cua_wire_empty_schema},
	[CUA_OP_DRAIN] = {&s_req_drain, &s_rep_drain},
	[CUA_OP_MODULE_GET_GLOBAL] = {&s_req_get_global, &s_rep_get_global},
	[CUA_OP_FUNC_GET_ATTRIBUTE] = {&s_req_get_attr, &s_rep_get_attr},
	[CUA_OP_FUNC_SET_ATTRIBUTE] = {&s_req_set_attr, &cua_wire_empty_schema},
	[CUA_OP_OCCUPANCY] = {&s_req_occupancy, &s_rep_occupancy},
	[CUA_OP_GRAPH_CREATE] = {&s_req_graph_create, &s_rep_graph_create},
	[CUA_OP_GRAPH_LAUNCH] = {&s_req_graph_launch, &cua_wire_empty_schema},
	[CUA_OP_GRAPH_DESTROY] = {&s_req_graph_destroy, &cua_wire_empty_schema},
	[CUA_OP_GRAPH_SET_ARGS] = {&s_req_graph_set_args, &cua_wire_empty_schema},
	[CUA_OP_EVENT_CREATE] = {&s_req_event_create, &s_rep_event_create},
	[CUA_OP_EVENT_DESTROY] = {&s_req_event, &cua_wire_empty_schema},
	[CUA_OP_EVENT_RECORD] = {&s_req_event_record, &cua_wire_empty_schema},
	[CUA_OP_STREAM_WAIT_EVENT] = {&s_req_stream_wait_event, &cua_wire_empty_schema},
	[CUA_OP_EVENT_SYNC] = {&s_req_event, &cua_wire_empty_schema},
	[CUA_OP_EVENT_ELAPSED] = {&s_req_event_elapsed, &s_rep_event_elapsed},
	[CUA_OP_EVENT_QUERY] = {&s_req_event, &s_rep_event_query},
	[CUA_OP_TENANT_ADD] = {&s_req_tenant_add, &s_rep_tenant_add},
	[CUA_OP_TENANT_SET] = {&s_req_tenant_set, &cua_wire_empty_schema},
	[CUA_OP_TENANT_REMOVE] = {&s_req_tenant_remove, &cua_wire_empty_schema},
	[CUA_OP_TENANT_LIST] = {&cua_wire_empty_schema, &s_rep_tenant_list},
};

int
cua_wire_op_known(uint32_t op)
{
	return op > 0 && op < CUA_OP_MAX && cua_wire_op_schemas[op].req != NULL;
}

/* ------------------------------------------------------------------ introspection */

static const char *const ftype_names[] = {
	[F_U32] = "u32", [F_U64] = "u64",   [F_I32] = "i32",     [F_BOOL] = "bool",   [F_STR] = "str",
	[F_BIN] = "bin", [F_DIM3] = "dim3", [F_ARRAY] = "array", [F_UNION] = "union", [F_STRUCT] = "struct",
};

int
cua_wire_schema_fields(uint32_t op, int reply, cua_wire_field_info *out, size_t max)
{
	if (!cua_wire_op_known(op))
		return -1;
	const struct schema *s = reply ? cua_wire_op_schemas[op].rep : cua_wire_op_schemas[op].req;
	for (size_t i = 0; i < s->nfields && i < max; i++) {
		const struct field *f = &s->fields[i];
		out[i].name = f->name;
		out[i].type = ftype_names[f->type];
		out[i].max = f->type == F_I32 ? INT32_MAX : f->max;
	}
	return (int)s->nfields;
}
