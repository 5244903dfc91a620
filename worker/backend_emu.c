/*
 * backend_emu.c — the emulated device (backend.h): device memory is host memory behind fake device addresses
 * (emu_mem.c), kernels come from the built-in library (emu_kernels.c), stream work (emu_work.c) runs on the
 * streams' pool of threads (emu_stream.c); modules (emu_module.c), events (emu_event.c) and graphs (emu_graph.c)
 * have files of their own. This file opens and closes the device and lists the backend's calls: the top of the
 * emulated device's files (core.h, "Layers").
 */
#include "config.h"

#include "emu_impl.h"
#include "extent.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The CU_DEVICE_ATTRIBUTE values the emulated device reports (ids as in CUDA's cuda.h, which this build does not
 * need), those of a small sm_90-class GPU; -1: filled in from the emulated device's own figures below. */
static const cua_wire_dev_attr emu_attrs[] = {
	{1, 1024},        /* MAX_THREADS_PER_BLOCK */
	{2, 1024},        /* MAX_BLOCK_DIM_X */
	{3, 1024},        /* MAX_BLOCK_DIM_Y */
	{4, 64},          /* MAX_BLOCK_DIM_Z */
	{5, 2147483647},  /* MAX_GRID_DIM_X */
	{6, 65535},       /* MAX_GRID_DIM_Y */
	{7, 65535},       /* MAX_GRID_DIM_Z */
	{8, 49152},       /* MAX_SHARED_MEMORY_PER_BLOCK */
	{9, 65536},       /* TOTAL_CONSTANT_MEMORY */
	{10, 32},         /* WARP_SIZE */
	{11, 2147483647}, /* MAX_PITCH */
	{12, 65536},      /* MAX_REGISTERS_PER_BLOCK */
	{13, 1000000},    /* CLOCK_RATE, kHz */
	{14, 512},        /* TEXTURE_ALIGNMENT */
	{16, -1},         /* MULTIPROCESSOR_COUNT */
	{17, 0},          /* KERNEL_EXEC_TIMEOUT */
	{18, 0},          /* INTEGRATED */
	{19, 1},          /* CAN_MAP_HOST_MEMORY */
	{20, 0},          /* COMPUTE_MODE: default */
	{31, 1},          /* CONCURRENT_KERNELS */
	{32, 0},          /* ECC_ENABLED */
	{36, 1000000},    /* MEMORY_CLOCK_RATE, kHz */
	{37, 64},         /* GLOBAL_MEMORY_BUS_WIDTH */
	{38, 0},          /* L2_CACHE_SIZE */
	{39, 2048},       /* MAX_THREADS_PER_MULTIPROCESSOR */
	{40, 2},          /* ASYNC_ENGINE_COUNT: the copy engine's threads */
	{41, 1},          /* UNIFIED_ADDRESSING */
	{75, -1},         /* COMPUTE_CAPABILITY_MAJOR */
	{76, -1},         /* COMPUTE_CAPABILITY_MINOR */
	{78, 1},          /* STREAM_PRIORITIES_SUPPORTED */
	{81, -1},         /* MAX_SHARED_MEMORY_PER_MULTIPROCESSOR */
	{82, 65536},      /* MAX_REGISTERS_PER_MULTIPROCESSOR */
	{95, -1},         /* COOPERATIVE_LAUNCH */
	{97, -1},         /* MAX_SHARED_MEMORY_PER_BLOCK_OPTIN */
	{106, 32},        /* MAX_BLOCKS_PER_MULTIPROCESSOR */
	{120, -1},        /* CLUSTER_LAUNCH */
};

static int32_t
emu_attr(const struct wdev_info *info, uint32_t id, int32_t v)
{
	switch (id) {
	case 16: return (int32_t)info->multiprocessors;
	case 75: return (int32_t)info->sm_major;
	case 76: return (int32_t)info->sm_minor;
	case 81: return (int32_t)info->max_shared_optin + 1024; /* a block's opt-in and the reserved 1 KB */
	case 95: return (int32_t)info->cooperative_launch;
	case 97: return (int32_t)info->max_shared_optin;
	case 120: return (int32_t)info->cluster_launch;
	default: return v;
	}
}

static int
emu_init(struct wk *w, const struct wk_host *host, struct wdev_info *info, cua_err *e)
{
	struct emu *E = calloc(1, sizeof(*E));
	if (E == NULL)
		return cua_err_set(e, CUA_ENOMEM, "out of host memory");
	E->w = w;
	E->host = host;
	w->be_state = E;
	E->size = w->opts.emu_mem ? w->opts.emu_mem : (1ull << 30);
	if (E->size > (1ull << 36))
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "emulated memory over 64 GiB");
	/* Fake device addresses: distinct per device and per worker generation, never host addresses. */
	E->base = (0x100ull + (uint64_t)w->opts.device) << 40 | (uint64_t)(w->opts.generation % 16) << 36;
	E->mem = mmap(NULL, E->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (E->mem == MAP_FAILED)
		return cua_err_set(e, CUA_ENOMEM, "cannot reserve %llu bytes of emulated memory",
				   (unsigned long long)E->size);
	long page = sysconf(_SC_PAGESIZE);
	E->page = page > 0 ? (uint64_t)page : 4096;
	pthread_mutex_init(&E->lock, NULL);
	if (extent_init(&E->alloc, E->size, EMU_ALIGN) != 0)
		return cua_err_set(e, CUA_ENOMEM, "out of host memory");
	int r = emu_pool_init(E, e);
	if (r != 0)
		return r;
	memset(info, 0, sizeof(*info));
	snprintf(info->name, sizeof(info->name), "cuasync emulated device %d", w->opts.device);
	snprintf(info->backend, sizeof(info->backend), "emu");
	info->sm_major = (uint32_t)w->opts.emu_sm / 10;
	info->sm_minor = (uint32_t)w->opts.emu_sm % 10;
	info->total_mem = E->size;
	info->multiprocessors = 4;
	info->prio_least = 0;
	info->prio_greatest = -5;
	/* as CUDA 12.1+ has them: large kernel parameters from sm_70, opt-in shared memory per architecture */
	info->max_param_bytes = w->opts.emu_sm >= 70 ? CUA_MAX_PARAM_BYTES : CUA_MAX_PARAM_BYTES_OLD;
	info->max_shared_optin = w->opts.emu_sm >= 90   ? 232448u
				 : w->opts.emu_sm >= 80 ? 166912u
				 : w->opts.emu_sm >= 70 ? 98304u
							: 49152u;
	info->cluster_launch = w->opts.emu_sm >= 90;     /* as CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH */
	info->cooperative_launch = w->opts.emu_sm >= 60; /* as CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH */
	for (size_t i = 0; i < sizeof(emu_attrs) / sizeof(emu_attrs[0]); i++)
		info->attrs[info->nattrs++] =
			(cua_wire_dev_attr){emu_attrs[i].id, emu_attr(info, emu_attrs[i].id, emu_attrs[i].value)};
	info->pool_streams = w->opts.pool_streams ? w->opts.pool_streams : 4;
	cua_idmap_init(&E->streams, info->pool_streams, WK_STREAM_ID_MAX);
	cua_idmap_init(&E->allocs, 0, 0); /* keyed by address: set, never allocated */
	cua_idmap_init(&E->events, 1, UINT32_MAX);
	wk_idtab_init(&E->graphs, 1, UINT32_MAX);
	cua_idmap_init(&E->modules, 1, EMU_MODULES_MAX); /* a function id is the module id << 8 | kernel */
	for (uint32_t sid = 0; sid < info->pool_streams; sid++) {
		uint32_t id = sid;
		if ((r = emu_stream_new(E, 0, true, &id, e)) != 0)
			return r;
	}
	return 0;
}

static void
emu_fini(struct wk *w)
{
	struct emu *E = w->be_state;
	emu_streams_fini(E); /* runs what is queued first */
	emu_pool_fini(E);
	emu_graphs_fini(E);
	emu_events_fini(E);
	emu_modules_fini(E);
	wk_idmap_fini_each(&E->allocs, wk_free_obj, NULL);
	extent_fini(&E->alloc);
	munmap(E->mem, E->size);
	free(E);
}

const struct wk_backend backend_emu = {
	.name = "emu",
	.init = emu_init,
	.fini = emu_fini,
	.module_load = emu_module_load,
	.module_unload = emu_module_unload,
	.function_get = emu_function_get,
	.mem_alloc = emu_mem_alloc,
	.mem_free = emu_mem_free,
	.stream_create = emu_stream_create,
	.stream_destroy = emu_stream_destroy,
	.htod = emu_htod,
	.dtoh = emu_dtoh,
	.dtod = emu_dtod,
	.memset = emu_memset,
	.launch = emu_launch,
	.notify = emu_notify,
	.module_get_global = emu_module_get_global,
	.func_get_attr = emu_func_get_attr,
	.func_set_attr = emu_func_set_attr,
	.occupancy = emu_occupancy,
	.graph_create = emu_graph_create,
	.graph_set_args = emu_graph_set_args,
	.graph_destroy = emu_graph_destroy,
	.graph_launch = emu_graph_launch,
	.event_create = emu_event_create,
	.event_destroy = emu_event_destroy,
	.event_record = emu_event_record,
	.stream_wait_event = emu_stream_wait_event,
	.event_notify = emu_event_notify,
	.event_elapsed = emu_event_elapsed,
	.event_query = emu_event_query,
};
