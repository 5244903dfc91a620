/*
 * cmd.c — the operations table: every request kind's row, from the file of its family, indexed by op.
 */
#include "config.h"

#include "cmd.h"

/* The rows, each defined in the file of its family. */
extern const struct cmd_entry cmd_hello_entry, cmd_ping_entry, cmd_devices_entry, cmd_status_entry;
extern const struct cmd_entry cmd_sessions_entry, cmd_disconnect_entry, cmd_drain_entry;
extern const struct cmd_entry cmd_module_load_entry, cmd_module_unload_entry, cmd_function_get_entry;
extern const struct cmd_entry cmd_mem_alloc_entry, cmd_mem_free_entry;
extern const struct cmd_entry cmd_memcpy_htod_entry, cmd_memcpy_dtoh_entry, cmd_memcpy_dtod_entry, cmd_memset_entry;
extern const struct cmd_entry cmd_memcpy_htod_host_entry, cmd_memcpy_dtoh_host_entry;
extern const struct cmd_entry cmd_stream_create_entry, cmd_stream_destroy_entry, cmd_stream_sync_entry;
extern const struct cmd_entry cmd_synchronize_entry;
extern const struct cmd_entry cmd_launch_entry, cmd_batch_entry;
extern const struct cmd_entry cmd_host_register_entry, cmd_host_unregister_entry;
extern const struct cmd_entry cmd_module_get_global_entry;
extern const struct cmd_entry cmd_func_get_attribute_entry, cmd_func_set_attribute_entry, cmd_occupancy_entry;
extern const struct cmd_entry cmd_graph_create_entry, cmd_graph_launch_entry, cmd_graph_destroy_entry;
extern const struct cmd_entry cmd_graph_set_args_entry;
extern const struct cmd_entry cmd_event_create_entry, cmd_event_destroy_entry, cmd_event_record_entry;
extern const struct cmd_entry cmd_stream_wait_event_entry, cmd_event_sync_entry, cmd_event_elapsed_entry;
extern const struct cmd_entry cmd_event_query_entry;
extern const struct cmd_entry cmd_tenant_add_entry, cmd_tenant_set_entry, cmd_tenant_remove_entry;
extern const struct cmd_entry cmd_tenant_list_entry;

#define ROW(name, entry) [CUA_OP_##name] = &entry

static const struct cmd_entry *const cmd_table[CUA_OP_MAX] = {
	ROW(HELLO, cmd_hello_entry),
	ROW(PING, cmd_ping_entry),
	ROW(DEVICES, cmd_devices_entry),
	ROW(STATUS, cmd_status_entry),
	ROW(SESSIONS, cmd_sessions_entry),
	ROW(DISCONNECT, cmd_disconnect_entry),
	ROW(DRAIN, cmd_drain_entry),
	ROW(TENANT_ADD, cmd_tenant_add_entry),
	ROW(TENANT_SET, cmd_tenant_set_entry),
	ROW(TENANT_REMOVE, cmd_tenant_remove_entry),
	ROW(TENANT_LIST, cmd_tenant_list_entry),
	ROW(MODULE_LOAD, cmd_module_load_entry),
	ROW(MODULE_UNLOAD, cmd_module_unload_entry),
	ROW(FUNCTION_GET, cmd_function_get_entry),
	ROW(MEM_ALLOC, cmd_mem_alloc_entry),
	ROW(MEM_FREE, cmd_mem_free_entry),
	ROW(MEMCPY_HTOD, cmd_memcpy_htod_entry),
	ROW(MEMCPY_DTOH, cmd_memcpy_dtoh_entry),
	ROW(MEMCPY_DTOD, cmd_memcpy_dtod_entry),
	ROW(MEMSET, cmd_memset_entry),
	ROW(MEMCPY_HTOD_HOST, cmd_memcpy_htod_host_entry),
	ROW(MEMCPY_DTOH_HOST, cmd_memcpy_dtoh_host_entry),
	ROW(STREAM_CREATE, cmd_stream_create_entry),
	ROW(STREAM_DESTROY, cmd_stream_destroy_entry),
	ROW(STREAM_SYNC, cmd_stream_sync_entry),
	ROW(SYNCHRONIZE, cmd_synchronize_entry),
	ROW(LAUNCH, cmd_launch_entry),
	ROW(BATCH, cmd_batch_entry),
	ROW(HOST_REGISTER, cmd_host_register_entry),
	ROW(HOST_UNREGISTER, cmd_host_unregister_entry),
	ROW(MODULE_GET_GLOBAL, cmd_module_get_global_entry),
	ROW(FUNC_GET_ATTRIBUTE, cmd_func_get_attribute_entry),
	ROW(FUNC_SET_ATTRIBUTE, cmd_func_set_attribute_entry),
	ROW(OCCUPANCY, cmd_occupancy_entry),
	ROW(GRAPH_CREATE, cmd_graph_create_entry),
	ROW(GRAPH_LAUNCH, cmd_graph_launch_entry),
	ROW(GRAPH_DESTROY, cmd_graph_destroy_entry),
	ROW(GRAPH_SET_ARGS, cmd_graph_set_args_entry),
	ROW(EVENT_CREATE, cmd_event_create_entry),
	ROW(EVENT_DESTROY, cmd_event_destroy_entry),
	ROW(EVENT_RECORD, cmd_event_record_entry),
	ROW(STREAM_WAIT_EVENT, cmd_stream_wait_event_entry),
	ROW(EVENT_SYNC, cmd_event_sync_entry),
	ROW(EVENT_ELAPSED, cmd_event_elapsed_entry),
	ROW(EVENT_QUERY, cmd_event_query_entry),
};

const struct cmd_entry *
cmd_find(uint32_t op)
{
	return op < CUA_OP_MAX ? cmd_table[op] : NULL;
}
