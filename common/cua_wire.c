#include "config.h"

#include "cua_wire.h"

#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

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

enum ftype { F_U32, F_U64, F_I32, F_BOOL, F_STR, F_BIN, F_DIM3, F_ARRAY, F_UNION, F_STRUCT };

struct schema;
struct ucase {
	uint32_t kind;
	const struct schema *s;
};
struct field {
	const char *name;
	enum ftype type;
	size_t off;       /* the field (pointer for arrays, kind for unions) */
	size_t off2;      /* arrays: uint32_t count; unions: the union storage */
	uint64_t max;     /* ints: largest value; str/bin: length; arrays: count */
	const void *sub;  /* arrays/structs: schema; unions: ucase table */
	size_t elem_size; /* arrays: element size; unions: number of cases */
};
struct schema {
	const char *name;
	size_t nfields;
	const struct field *fields;
	/* A schema with an optional tail (LAUNCH): the fields up to nrequired must be there, the rest may be left
	 * off from the end; count_off is the uint32_t that receives how many came (decode) or says how many to
	 * send (encode). 0: every field is required. */
	size_t nrequired, count_off;
};

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

static const struct schema empty_schema = {"empty", 0, NULL};
#define BYTES_MAX UINT32_MAX

SCHEMA(s_req_hello, "HELLO", U32(struct cua_req_hello, min_version, UINT32_MAX),
       U32(struct cua_req_hello, max_version, UINT32_MAX), STR(struct cua_req_hello, client, CUA_MAX_IDENT),
       U32(struct cua_req_hello, pid, UINT32_MAX), STR(struct cua_req_hello, token, CUA_MAX_TOKEN));
SCHEMA(s_rep_hello, "HELLO reply", U32(struct cua_rep_hello, version, UINT32_MAX), U64(struct cua_rep_hello, session),
       STR(struct cua_rep_hello, server, CUA_MAX_IDENT), U64(struct cua_rep_hello, max_message),
       U32(struct cua_rep_hello, max_batch, UINT32_MAX), U32(struct cua_rep_hello, max_args, UINT32_MAX),
       U32(struct cua_rep_hello, devices, CUA_MAX_DEVICES));
SCHEMA(s_ping, "PING", U64(struct cua_req_ping, nonce));
SCHEMA(s_device_info, "device", U32(cua_wire_device, index, CUA_MAX_DEVICES), STR(cua_wire_device, name, 256),
       U32(cua_wire_device, sm_major, 255), U32(cua_wire_device, sm_minor, 255), U64(cua_wire_device, total_mem),
       U32(cua_wire_device, multiprocessors, UINT32_MAX), I32(cua_wire_device, prio_least),
       I32(cua_wire_device, prio_greatest), STR(cua_wire_device, backend, CUA_MAX_IDENT),
       U32(cua_wire_device, generation, UINT32_MAX), U32(cua_wire_device, max_param_bytes, CUA_MAX_PARAM_BYTES),
       U32(cua_wire_device, max_shared_optin, UINT32_MAX), U32(cua_wire_device, cluster_launch, 1),
       U32(cua_wire_device, cooperative_launch, 1));
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
       U32(struct cua_req_host_register, fd, INT32_MAX), U64(struct cua_req_host_register, bytes));
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
SCHEMA(s_dev_status, "device status", U32(cua_wire_dev_status, index, CUA_MAX_DEVICES),
       U32(cua_wire_dev_status, generation, UINT32_MAX), U32(cua_wire_dev_status, restarts, UINT32_MAX),
       U32(cua_wire_dev_status, in_flight, UINT32_MAX), U64(cua_wire_dev_status, allocations), U64(cua_wire_dev_status, alloc_bytes));
SCHEMA(s_counts, "counts", U64(cua_wire_counts, allocations), U64(cua_wire_counts, alloc_bytes), U64(cua_wire_counts, modules),
       U64(cua_wire_counts, functions), U64(cua_wire_counts, streams), U64(cua_wire_counts, in_flight));
SCHEMA(s_rep_status, "STATUS reply", U64(struct cua_rep_status, uptime_ms),
       U32(struct cua_rep_status, sessions, UINT32_MAX), U64(struct cua_rep_status, requests),
       U64(struct cua_rep_status, errors),
       ARR(struct cua_rep_status, devices, ndevices, CUA_MAX_DEVICES, s_dev_status, cua_wire_dev_status),
       NESTED(struct cua_rep_status, session, s_counts), NESTED(struct cua_rep_status, total, s_counts),
       U32(struct cua_rep_status, insecure_listeners, UINT32_MAX));
SCHEMA(s_session_info, "session", U64(cua_wire_session, session), STR(cua_wire_session, client, CUA_MAX_IDENT),
       U32(cua_wire_session, pid, UINT32_MAX), U32(cua_wire_session, peer_pid, UINT32_MAX),
       U64(cua_wire_session, age_ms), U64(cua_wire_session, requests), U64(cua_wire_session, errors),
       U64(cua_wire_session, in_flight), U64(cua_wire_session, alloc_bytes), U64(cua_wire_session, streams),
       U64(cua_wire_session, modules), U32(cua_wire_session, operator, 1),
       STR(cua_wire_session, tenant, CUA_MAX_TENANT_NAME), U64(cua_wire_session, busy_ns));
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

/* clang-format on */

/* One row per op: request body schema, reply body schema. */
static const struct {
	const struct schema *req, *rep;
} op_schemas[CUA_OP_MAX] = {
	[CUA_OP_HELLO] = {&s_req_hello, &s_rep_hello},
	[CUA_OP_PING] = {&s_ping, &s_ping},
	[CUA_OP_DEVICES] = {&empty_schema, &s_rep_devices},
	[CUA_OP_MODULE_LOAD] = {&s_req_module_load, &s_rep_module_load},
	[CUA_OP_MODULE_UNLOAD] = {&s_req_module_unload, &empty_schema},
	[CUA_OP_FUNCTION_GET] = {&s_req_function_get, &s_rep_function_get},
	[CUA_OP_MEM_ALLOC] = {&s_req_mem_alloc, &s_rep_mem_alloc},
	[CUA_OP_MEM_FREE] = {&s_req_mem_free, &empty_schema},
	[CUA_OP_MEMCPY_HTOD] = {&s_req_htod, &empty_schema},
	[CUA_OP_MEMCPY_DTOH] = {&s_req_dtoh, &s_rep_dtoh},
	[CUA_OP_MEMCPY_DTOD] = {&s_req_dtod, &empty_schema},
	[CUA_OP_MEMSET] = {&s_req_memset, &empty_schema},
	[CUA_OP_STREAM_CREATE] = {&s_req_stream_create, &s_rep_stream_create},
	[CUA_OP_STREAM_DESTROY] = {&s_req_stream, &empty_schema},
	[CUA_OP_STREAM_SYNC] = {&s_req_stream, &empty_schema},
	[CUA_OP_LAUNCH] = {&s_req_launch, &empty_schema},
	[CUA_OP_BATCH] = {&s_req_batch, &s_rep_batch},
	[CUA_OP_SYNCHRONIZE] = {&empty_schema, &empty_schema},
	[CUA_OP_STATUS] = {&empty_schema, &s_rep_status},
	[CUA_OP_HOST_REGISTER] = {&s_req_host_register, &s_rep_host_register},
	[CUA_OP_HOST_UNREGISTER] = {&s_req_host_unregister, &empty_schema},
	[CUA_OP_MEMCPY_HTOD_HOST] = {&s_req_htod_host, &empty_schema},
	[CUA_OP_MEMCPY_DTOH_HOST] = {&s_req_dtoh_host, &empty_schema},
	[CUA_OP_SESSIONS] = {&empty_schema, &s_rep_sessions},
	[CUA_OP_DISCONNECT] = {&s_req_disconnect, &empty_schema},
	[CUA_OP_DRAIN] = {&s_req_drain, &s_rep_drain},
	[CUA_OP_MODULE_GET_GLOBAL] = {&s_req_get_global, &s_rep_get_global},
	[CUA_OP_FUNC_GET_ATTRIBUTE] = {&s_req_get_attr, &s_rep_get_attr},
	[CUA_OP_FUNC_SET_ATTRIBUTE] = {&s_req_set_attr, &empty_schema},
	[CUA_OP_OCCUPANCY] = {&s_req_occupancy, &s_rep_occupancy},
	[CUA_OP_GRAPH_CREATE] = {&s_req_graph_create, &s_rep_graph_create},
	[CUA_OP_GRAPH_LAUNCH] = {&s_req_graph_launch, &empty_schema},
	[CUA_OP_GRAPH_DESTROY] = {&s_req_graph_destroy, &empty_schema},
	[CUA_OP_GRAPH_SET_ARGS] = {&s_req_graph_set_args, &empty_schema},
	[CUA_OP_EVENT_CREATE] = {&s_req_event_create, &s_rep_event_create},
	[CUA_OP_EVENT_DESTROY] = {&s_req_event, &empty_schema},
	[CUA_OP_EVENT_RECORD] = {&s_req_event_record, &empty_schema},
	[CUA_OP_STREAM_WAIT_EVENT] = {&s_req_stream_wait_event, &empty_schema},
	[CUA_OP_EVENT_SYNC] = {&s_req_event, &empty_schema},
	[CUA_OP_EVENT_ELAPSED] = {&s_req_event_elapsed, &s_rep_event_elapsed},
	[CUA_OP_EVENT_QUERY] = {&s_req_event, &s_rep_event_query},
};

static int
op_known(uint32_t op)
{
	return op > 0 && op < CUA_OP_MAX && op_schemas[op].req != NULL;
}

/* ------------------------------------------------------------------ introspection */

static const char *const ftype_names[] = {
	[F_U32] = "u32", [F_U64] = "u64",   [F_I32] = "i32",     [F_BOOL] = "bool",   [F_STR] = "str",
	[F_BIN] = "bin", [F_DIM3] = "dim3", [F_ARRAY] = "array", [F_UNION] = "union", [F_STRUCT] = "struct",
};

int
cua_wire_schema_fields(uint32_t op, int reply, cua_wire_field_info *out, size_t max)
{
	if (!op_known(op))
		return -1;
	const struct schema *s = reply ? op_schemas[op].rep : op_schemas[op].req;
	for (size_t i = 0; i < s->nfields && i < max; i++) {
		const struct field *f = &s->fields[i];
		out[i].name = f->name;
		out[i].type = ftype_names[f->type];
		out[i].max = f->type == F_I32 ? INT32_MAX : f->max;
	}
	return (int)s->nfields;
}

/* ------------------------------------------------------------------ decode */

static const char *
type_name(const msgpack_object *o)
{
	switch (o->type) {
	case MSGPACK_OBJECT_NIL: return "nil";
	case MSGPACK_OBJECT_BOOLEAN: return "bool";
	case MSGPACK_OBJECT_POSITIVE_INTEGER: return "uint";
	case MSGPACK_OBJECT_NEGATIVE_INTEGER: return "negative int";
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64: return "float";
	case MSGPACK_OBJECT_STR: return "str";
	case MSGPACK_OBJECT_ARRAY: return "array";
	case MSGPACK_OBJECT_MAP: return "map";
	case MSGPACK_OBJECT_BIN: return "bin";
	default: return "ext";
	}
}

static int dec_struct(const struct schema *s, const msgpack_object *o, char *base, msgpack_zone *z, cua_err *err);

static int
dec_u64(const msgpack_object *o, uint64_t max, uint64_t *v)
{
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER || o->via.u64 > max)
		return -1;
	*v = o->via.u64;
	return 0;
}

/* F_U32 and F_U64: a uint no larger than the field's max. */
static int
dec_uint(const struct schema *s, const struct field *f, const msgpack_object *o, char *base, cua_err *err)
{
	uint64_t v;
	if (dec_u64(o, f->max, &v) != 0)
		return cua_err_set(err, CUA_EPROTOCOL, "%s.%s: expected uint <= %llu, got %s", s->name, f->name,
				   (unsigned long long)f->max, type_name(o));
	if (f->type == F_U32)
		*(uint32_t *)(base + f->off) = (uint32_t)v;
	else
		*(uint64_t *)(base + f->off) = v;
	return 0;
}

/* F_I32: a uint or negative int that fits an int32_t. */
static int
dec_int32(const struct schema *s, const struct field *f, const msgpack_object *o, char *base, cua_err *err)
{
	int64_t iv;
	if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= INT32_MAX)
		iv = (int64_t)o->via.u64;
	else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER && o->via.i64 >= INT32_MIN)
		iv = o->via.i64;
	else
		return cua_err_set(err, CUA_EPROTOCOL, "%s.%s: expected int32, got %s", s->name, f->name, type_name(o));
	*(int32_t *)(base + f->off) = (int32_t)iv;
	return 0;
}

static int
dec_bool(const struct schema *s, const struct field *f, const msgpack_object *o, char *base, cua_err *err)
{
	if (o->type != MSGPACK_OBJECT_BOOLEAN)
		return cua_err_set(err, CUA_EPROTOCOL, "%s.%s: expected bool, got %s", s->name, f->name, type_name(o));
	*(bool *)(base + f->off) = o->via.boolean;
	return 0;
}

/* F_STR and F_BIN: a cua_bytes pointing into the message (no copy), at most f->max bytes. */
static int
dec_bytes(const struct schema *s, const struct field *f, const msgpack_object *o, char *base, cua_err *err)
{
	int want = f->type == F_STR ? MSGPACK_OBJECT_STR : MSGPACK_OBJECT_BIN;
	if ((int)o->type != want)
		return cua_err_set(err, CUA_EPROTOCOL, "%s.%s: expected %s, got %s", s->name, f->name,
				   f->type == F_STR ? "str" : "bin", type_name(o));
	/* str and bin share the layout of msgpack_object_bin: size then ptr. */
	uint32_t n = f->type == F_STR ? o->via.str.size : o->via.bin.size;
	if (n > f->max)
		return cua_err_set(err, CUA_ETOO_LARGE, "%s.%s: %u bytes exceed the limit of %llu", s->name, f->name, n,
				   (unsigned long long)f->max);
	cua_bytes *b = (cua_bytes *)(base + f->off);
	b->ptr = f->type == F_STR ? (const void *)o->via.str.ptr : (const void *)o->via.bin.ptr;
	b->len = n;
	return 0;
}

/* F_DIM3: [x, y, z] of uint32 into uint32_t[3]. */
static int
dec_dim3(const struct schema *s, const struct field *f, const msgpack_object *o, char *base, cua_err *err)
{
	uint64_t v;
	if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != 3)
		return cua_err_set(err, CUA_EPROTOCOL, "%s.%s: expected [x, y, z], got %s", s->name, f->name,
				   type_name(o));
	uint32_t *d = (uint32_t *)(base + f->off);
	for (int i = 0; i < 3; i++) {
		if (dec_u64(&o->via.array.ptr[i], UINT32_MAX, &v) != 0)
			return cua_err_set(err, CUA_EPROTOCOL, "%s.%s[%d]: expected uint32, got %s", s->name, f->name,
					   i, type_name(&o->via.array.ptr[i]));
		d[i] = (uint32_t)v;
	}
	return 0;
}

/* Element i of an ARGS array: bin (passed by value) or uint (a device pointer). */
static int
dec_launch_arg(const struct schema *s, const struct field *f, uint32_t i, const msgpack_object *e, cua_wire_arg *a,
	       cua_err *err)
{
	if (e->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
		a->kind = CUA_ARG_DEVPTR;
		a->devptr = e->via.u64;
	} else if (e->type == MSGPACK_OBJECT_BIN && e->via.bin.size >= 1 && e->via.bin.size <= CUA_MAX_ARG_BYTES) {
		a->kind = CUA_ARG_BYTES;
		a->bytes.ptr = e->via.bin.ptr;
		a->bytes.len = e->via.bin.size;
	} else {
		return cua_err_set(err, CUA_EPROTOCOL,
				   "%s.%s[%u]: expected bin of 1..%u bytes or uint device pointer, got %s", s->name,
				   f->name, i, CUA_MAX_ARG_BYTES, type_name(e));
	}
	return 0;
}

/* F_ARRAY: up to f->max elements, zeroed and allocated in z; each a nested struct (f->sub) or, when f->sub is
 * NULL, a launch argument. The pointer and count are stored only once every element decoded. */
static int
dec_array(const struct schema *s, const struct field *f, const msgpack_object *o, char *base, msgpack_zone *z,
	  cua_err *err)
{
	if (o->type != MSGPACK_OBJECT_ARRAY)
		return cua_err_set(err, CUA_EPROTOCOL, "%s.%s: expected array, got %s", s->name, f->name, type_name(o));
	uint32_t n = o->via.array.size;
	if (n > f->max)
		return cua_err_set(err, CUA_ETOO_LARGE, "%s.%s: %u elements exceed the limit of %llu", s->name, f->name,
				   n, (unsigned long long)f->max);
	char *items = NULL;
	if (n > 0) {
		items = msgpack_zone_malloc(z, (size_t)n * f->elem_size);
		if (items == NULL)
			return cua_err_set(err, CUA_ENOMEM, "%s.%s: out of memory", s->name, f->name);
		memset(items, 0, (size_t)n * f->elem_size);
	}
	for (uint32_t i = 0; i < n; i++) {
		const msgpack_object *e = &o->via.array.ptr[i];
		char *ebase = items + (size_t)i * f->elem_size;
		int r;
		if (f->sub == NULL)
			r = dec_launch_arg(s, f, i, e, (cua_wire_arg *)ebase, err);
		else
			r = dec_struct(f->sub, e, ebase, z, err);
		if (r != 0)
			return r;
	}
	*(void **)(base + f->off) = items;
	*(uint32_t *)(base + f->off2) = n;
	return 0;
}

/* F_UNION: [kind, body], the body decoded by the schema that f's ucase table gives for kind. */
static int
dec_union(const struct schema *s, const struct field *f, const msgpack_object *o, char *base, msgpack_zone *z,
	  cua_err *err)
{
	if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != 2)
		return cua_err_set(err, CUA_EPROTOCOL, "%s: expected [kind, body], got %s", s->name, type_name(o));
	if (o->via.array.ptr[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return cua_err_set(err, CUA_EPROTOCOL, "%s.kind: expected uint, got %s", s->name,
				   type_name(&o->via.array.ptr[0]));
	uint64_t kind = o->via.array.ptr[0].via.u64;
	const struct ucase *cases = f->sub;
	for (size_t i = 0; i < f->elem_size; i++) {
		if (cases[i].kind == kind) {
			*(uint32_t *)(base + f->off) = (uint32_t)kind;
			return dec_struct(cases[i].s, &o->via.array.ptr[1], base + f->off2, z, err);
		}
	}
	return cua_err_set(err, CUA_EPROTOCOL, "%s.kind: %llu is not an item kind", s->name, (unsigned long long)kind);
}

/* Decodes o as field f of schema s into the struct at base; arrays are allocated in z. */
static int
dec_field(const struct schema *s, const struct field *f, const msgpack_object *o, char *base, msgpack_zone *z,
	  cua_err *err)
{
	switch (f->type) {
	case F_U32:
	case F_U64: return dec_uint(s, f, o, base, err);
	case F_I32: return dec_int32(s, f, o, base, err);
	case F_BOOL: return dec_bool(s, f, o, base, err);
	case F_STR:
	case F_BIN: return dec_bytes(s, f, o, base, err);
	case F_DIM3: return dec_dim3(s, f, o, base, err);
	case F_ARRAY: return dec_array(s, f, o, base, z, err);
	case F_STRUCT: return dec_struct(f->sub, o, base + f->off, z, err);
	case F_UNION: return dec_union(s, f, o, base, z, err);
	}
	return cua_err_set(err, CUA_EINTERNAL, "%s.%s: bad schema", s->name, f->name);
}

static int
dec_struct(const struct schema *s, const msgpack_object *o, char *base, msgpack_zone *z, cua_err *err)
{
	if (s->nfields == 1 && s->fields[0].type == F_UNION)
		return dec_field(s, &s->fields[0], o, base, z, err);
	if (o->type != MSGPACK_OBJECT_ARRAY)
		return cua_err_set(err, CUA_EPROTOCOL, "%s: expected array of %zu fields, got %s", s->name, s->nfields,
				   type_name(o));
	size_t n = o->via.array.size;
	if (s->nrequired == 0 && n != s->nfields)
		return cua_err_set(err, CUA_EPROTOCOL, "%s: expected %zu fields, got %u", s->name, s->nfields,
				   o->via.array.size);
	if (s->nrequired != 0 && (n < s->nrequired || n > s->nfields))
		return cua_err_set(err, CUA_EPROTOCOL, "%s: expected %zu..%zu fields, got %u", s->name, s->nrequired,
				   s->nfields, o->via.array.size);
	for (size_t i = 0; i < n; i++) {
		int r = dec_field(s, &s->fields[i], &o->via.array.ptr[i], base, z, err);
		if (r != 0)
			return r;
	}
	if (s->nrequired != 0)
		*(uint32_t *)(base + s->count_off) = (uint32_t)n;
	return 0;
}

/* Frees what unpack_new made (NULL is fine). */
static void
owner_free(void *owner)
{
	msgpack_unpacked *unp = owner;
	if (unp == NULL)
		return;
	msgpack_unpacked_destroy(unp);
	free(unp);
}

/* Checks the structure, then lets msgpack-c build the object tree (bounded by the checks) in a new
 * msgpack_unpacked. *unp is set whatever the result (NULL only when out of memory); the caller owns it. */
static int
unpack_new(const void *buf, size_t len, msgpack_unpacked **unp, cua_err *err)
{
	*unp = malloc(sizeof(**unp));
	if (*unp == NULL)
		return cua_err_set(err, CUA_ENOMEM, "out of memory for the decoder");
	msgpack_unpacked_init(*unp);
	int r = cua_wire_check(buf, len, err);
	if (r != 0)
		return r;
	size_t off = 0;
	msgpack_unpack_return ur = msgpack_unpack_next(*unp, buf, len, &off);
	if (ur != MSGPACK_UNPACK_SUCCESS || off != len)
		return cua_err_set(err, CUA_EPROTOCOL, "msgpack-c rejected the message (%d)", (int)ur);
	return 0;
}

static int
dec_header(const msgpack_object *root, uint32_t nfields, uint32_t *version, uint32_t *op, cua_err *err)
{
	if (root->type != MSGPACK_OBJECT_ARRAY || root->via.array.size != nfields)
		return cua_err_set(err, CUA_EPROTOCOL, "message: expected an array of %u elements", nfields);
	const msgpack_object *f = root->via.array.ptr;
	uint64_t v;
	if (dec_u64(&f[0], UINT32_MAX, &v) != 0)
		return cua_err_set(err, CUA_EPROTOCOL, "message.version: expected uint32, got %s", type_name(&f[0]));
	*version = (uint32_t)v;
	if (dec_u64(&f[1], UINT32_MAX, &v) != 0)
		return cua_err_set(err, CUA_EPROTOCOL, "message.op: expected uint32, got %s", type_name(&f[1]));
	*op = (uint32_t)v;
	if (*version < CUA_PROTO_VERSION_MIN || *version > CUA_PROTO_VERSION)
		return cua_err_set(err, CUA_EVERSION, "protocol version %u is not supported; this side speaks %u..%u",
				   *version, CUA_PROTO_VERSION_MIN, CUA_PROTO_VERSION);
	if (!op_known(*op))
		return cua_err_set(err, CUA_EUNKNOWN_OP, "unknown op %u", *op);
	return 0;
}

int
cua_wire_decode_request(const void *buf, size_t len, cua_wire_request *out, cua_err *err)
{
	msgpack_unpacked *unp;
	memset(out, 0, sizeof(*out));
	cua_wire_peek_header(buf, len, out);
	int r = unpack_new(buf, len, &unp, err);
	out->owner = unp;
	if (r != 0)
		return r;
	const msgpack_object *root = &unp->data;
	if ((r = dec_header(root, 4, &out->version, &out->op, err)) != 0)
		return r;
	uint64_t seq;
	if (dec_u64(&root->via.array.ptr[2], UINT64_MAX, &seq) != 0)
		return cua_err_set(err, CUA_EPROTOCOL, "message.seq: expected uint64, got %s",
				   type_name(&root->via.array.ptr[2]));
	out->seq = seq;
	return dec_struct(op_schemas[out->op].req, &root->via.array.ptr[3], (char *)&out->body, unp->zone, err);
}

void
cua_wire_request_free(cua_wire_request *r)
{
	owner_free(r->owner);
	r->owner = NULL;
}

int
cua_wire_decode_reply(const void *buf, size_t len, cua_wire_reply *out, cua_err *err)
{
	msgpack_unpacked *unp;
	int r = unpack_new(buf, len, &unp, err);
	memset(out, 0, sizeof(*out));
	out->owner = unp;
	if (r != 0)
		return r;
	const msgpack_object *root = &unp->data;
	/* An error reply may echo an op this side does not know (or 0): its body is [] anyway. */
	int hr = dec_header(root, 6, &out->version, &out->op, err);
	if (hr != 0 && hr != CUA_EUNKNOWN_OP)
		return hr;
	const msgpack_object *f = root->via.array.ptr;
	uint64_t v;
	if (dec_u64(&f[2], UINT32_MAX, &v) != 0)
		return cua_err_set(err, CUA_EPROTOCOL, "reply.status: expected uint32, got %s", type_name(&f[2]));
	out->status = (uint32_t)v;
	if (hr != 0 && out->status == CUA_OK)
		return hr;
	if (f[3].type != MSGPACK_OBJECT_STR || f[3].via.str.size > CUA_MAX_IDENT)
		return cua_err_set(err, CUA_EPROTOCOL, "reply.name: expected str of <= %u bytes", CUA_MAX_IDENT);
	if (f[4].type != MSGPACK_OBJECT_STR || f[4].via.str.size > CUA_MAX_MESSAGE_TEXT)
		return cua_err_set(err, CUA_EPROTOCOL, "reply.message: expected str of <= %u bytes",
				   CUA_MAX_MESSAGE_TEXT);
	out->name.ptr = f[3].via.str.ptr;
	out->name.len = f[3].via.str.size;
	out->message.ptr = f[4].via.str.ptr;
	out->message.len = f[4].via.str.size;
	const struct schema *s = out->status == CUA_OK ? op_schemas[out->op].rep : &empty_schema;
	return dec_struct(s, &f[5], (char *)&out->body, unp->zone, err);
}

void
cua_wire_reply_free(cua_wire_reply *r)
{
	owner_free(r->owner);
	r->owner = NULL;
}

/* ------------------------------------------------------------------ encode */

static int enc_struct(msgpack_packer *pk, const struct schema *s, const char *base);

static int
enc_bytes(msgpack_packer *pk, int is_str, const cua_bytes *b)
{
	int r = is_str ? msgpack_pack_str(pk, b->len) : msgpack_pack_bin(pk, b->len);
	if (r == 0 && b->len > 0)
		r = is_str ? msgpack_pack_str_body(pk, b->ptr, b->len) : msgpack_pack_bin_body(pk, b->ptr, b->len);
	return r;
}

static int
enc_field(msgpack_packer *pk, const struct field *f, const char *base)
{
	int r = 0;
	switch (f->type) {
	case F_U32: return msgpack_pack_uint32(pk, *(const uint32_t *)(base + f->off));
	case F_U64: return msgpack_pack_uint64(pk, *(const uint64_t *)(base + f->off));
	case F_I32: return msgpack_pack_int32(pk, *(const int32_t *)(base + f->off));
	case F_BOOL: return *(const bool *)(base + f->off) ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
	case F_STR:
	case F_BIN: return enc_bytes(pk, f->type == F_STR, (const cua_bytes *)(base + f->off));
	case F_DIM3: {
		const uint32_t *d = (const uint32_t *)(base + f->off);
		r = msgpack_pack_array(pk, 3);
		for (int i = 0; r == 0 && i < 3; i++)
			r = msgpack_pack_uint32(pk, d[i]);
		return r;
	}
	case F_ARRAY: {
		const char *items = *(char *const *)(base + f->off);
		uint32_t n = *(const uint32_t *)(base + f->off2);
		r = msgpack_pack_array(pk, n);
		for (uint32_t i = 0; r == 0 && i < n; i++) {
			const char *e = items + (size_t)i * f->elem_size;
			if (f->sub == NULL) {
				const cua_wire_arg *a = (const cua_wire_arg *)e;
				r = a->kind == CUA_ARG_DEVPTR ? msgpack_pack_uint64(pk, a->devptr)
							      : enc_bytes(pk, 0, &a->bytes);
			} else {
				r = enc_struct(pk, f->sub, e);
			}
		}
		return r;
	}
	case F_STRUCT: return enc_struct(pk, f->sub, base + f->off);
	case F_UNION: {
		uint32_t kind = *(const uint32_t *)(base + f->off);
		const struct ucase *cases = f->sub;
		for (size_t i = 0; i < f->elem_size; i++) {
			if (cases[i].kind == kind) {
				r = msgpack_pack_array(pk, 2);
				if (r == 0)
					r = msgpack_pack_uint32(pk, kind);
				return r == 0 ? enc_struct(pk, cases[i].s, base + f->off2) : r;
			}
		}
		return CUA_EBAD_ARGUMENT;
	}
	}
	return CUA_EINTERNAL;
}

static int
enc_struct(msgpack_packer *pk, const struct schema *s, const char *base)
{
	if (s->nfields == 1 && s->fields[0].type == F_UNION)
		return enc_field(pk, &s->fields[0], base);
	size_t n = s->nfields;
	if (s->nrequired != 0) { /* the fields the struct asks for, within the schema's range */
		n = *(const uint32_t *)(base + s->count_off);
		n = n < s->nrequired ? s->nrequired : n > s->nfields ? s->nfields : n;
	}
	int r = msgpack_pack_array(pk, (uint32_t)n);
	for (size_t i = 0; r == 0 && i < n; i++)
		r = enc_field(pk, &s->fields[i], base);
	return r;
}

static int
packer_result(int r)
{
	return r == 0 ? 0 : r > 0 ? r : CUA_ENOMEM;
}

int
cua_wire_pack_request(cua_wire_out out, uint32_t op, uint64_t seq, const void *body)
{
	if (!op_known(op))
		return CUA_EUNKNOWN_OP;
	const struct schema *s = op_schemas[op].req;
	if (s->nfields > 0 && body == NULL)
		return CUA_EBAD_ARGUMENT;
	msgpack_packer packer, *pk = &packer;
	msgpack_packer_init(pk, out.data, out.write);
	int r = msgpack_pack_array(pk, 4);
	if (r == 0)
		r = msgpack_pack_uint32(pk, CUA_PROTO_VERSION);
	if (r == 0)
		r = msgpack_pack_uint32(pk, op);
	if (r == 0) /* always 9 bytes, so that cua_wire_patch_seq can set it after packing */
		r = msgpack_pack_fix_uint64(pk, seq);
	if (r == 0)
		r = s->nfields > 0 ? enc_struct(pk, s, body) : msgpack_pack_array(pk, 0);
	return packer_result(r);
}

int
cua_wire_pack_reply(cua_wire_out out, uint32_t op, uint32_t status, const char *message, const void *body)
{
	const struct schema *s = &empty_schema;
	if (status == CUA_OK && op_known(op))
		s = op_schemas[op].rep;
	if (s->nfields > 0 && body == NULL)
		return CUA_EBAD_ARGUMENT;
	if (message == NULL)
		message = cua_strerror((int)status);
	size_t mlen = strlen(message);
	if (mlen > CUA_MAX_MESSAGE_TEXT)
		mlen = CUA_MAX_MESSAGE_TEXT;
	const char *name = cua_strerror_name((int)status);
	cua_bytes nb = {name, (uint32_t)strlen(name)}, mb = {message, (uint32_t)mlen};
	msgpack_packer packer, *pk = &packer;
	msgpack_packer_init(pk, out.data, out.write);
	int r = msgpack_pack_array(pk, 6);
	if (r == 0)
		r = msgpack_pack_uint32(pk, CUA_PROTO_VERSION);
	if (r == 0)
		r = msgpack_pack_uint32(pk, op);
	if (r == 0)
		r = msgpack_pack_uint32(pk, status);
	if (r == 0)
		r = enc_bytes(pk, 1, &nb);
	if (r == 0)
		r = enc_bytes(pk, 1, &mb);
	if (r == 0)
		r = s->nfields > 0 ? enc_struct(pk, s, body) : msgpack_pack_array(pk, 0);
	return packer_result(r);
}

int
cua_wire_patch_seq(void *msg, size_t len, uint64_t seq)
{
	unsigned char *p = msg;
	if (len < CUA_WIRE_SEQ_OFFSET + 8 || p[0] != 0x94 || p[CUA_WIRE_SEQ_OFFSET - 1] != 0xcf)
		return CUA_EBAD_ARGUMENT;
	for (int i = 7; i >= 0; i--, seq >>= 8)
		p[CUA_WIRE_SEQ_OFFSET + i] = (unsigned char)seq;
	return 0;
}

/* ------------------------------------------------------------------ growable buffer */

int
cua_wbuf_write(void *data, const char *buf, size_t len)
{
	cua_wbuf *b = data;
	if (len > SIZE_MAX - b->len)
		return -1;
	if (b->len + len > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + len)
			cap *= 2;
		char *p = realloc(b->data, cap);
		if (p == NULL)
			return -1;
		b->data = p;
		b->cap = cap;
	}
	memcpy(b->data + b->len, buf, len);
	b->len += len;
	return 0;
}

cua_wire_out
cua_wbuf_out(cua_wbuf *b)
{
	return (cua_wire_out){cua_wbuf_write, b};
}

void
cua_wbuf_free(cua_wbuf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}
