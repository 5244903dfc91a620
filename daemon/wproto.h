/*
 * wproto.h — how the front-end and a GPU worker talk: the shared-memory region and the binary records on its
 * two rings. Both sides are built from the same source, so these are plain structs (no versioning).
 *
 * Region (one memfd, mapped by both):  [shm_hdr][command ring][completion ring][staging area]
 *
 * Command record (front-end → worker): wcmd_req, then ncmds × (wcmd + its payload, 8-byte aligned).
 * Completion record (worker → front-end): wcpl_req, then ncmds × (wcpl + detail + data, 8-byte aligned).
 * A request's completion comes once every one of its commands has finished (stream work included).
 * The worker's first completion record has req == 0 and reports the device (wdev_info in data) or why the
 * device cannot be used.
 */
#ifndef CUAD_WPROTO_H
#define CUAD_WPROTO_H

#include <stdint.h>

#define SHM_MAGIC 0x43554144u /* "CUAD" */

struct shm_hdr {
	uint32_t magic, pad;
	uint64_t cmd_off, cmd_size; /* ring data bytes */
	uint64_t cpl_off, cpl_size;
	uint64_t staging_off, staging_size;
	uint64_t total;
};

enum wop_code {
	W_MODULE_LOAD = 1, /* staging image; value: module id */
	W_MODULE_UNLOAD,
	W_FUNCTION_GET, /* value: function id; data: cua_param_info[] */
	W_MEM_ALLOC,    /* value: device address */
	W_MEM_FREE,
	W_STREAM_CREATE, /* value: stream id */
	W_STREAM_DESTROY,
	W_STREAM_SYNC,
	W_HTOD,
	W_DTOH,
	W_DTOD,
	W_MEMSET,
	W_LAUNCH,
	W_HOST_REGISTER,   /* a=fd number in the front-end (opened via /proc), b=bytes; value: buffer id */
	W_HOST_UNREGISTER, /* a=buffer id */
};

struct wcmd_req {
	uint64_t req;
	uint32_t ncmds, pad;
};

struct wcmd {
	uint32_t op;
	uint32_t size; /* bytes of this command including this header, 8-byte aligned */
	uint32_t stream; /* worker stream id for stream work */
	uint32_t format; /* MODULE_LOAD image format; MEMSET width; LAUNCH flags */
	uint64_t a, b, c, d;
	/* a/b/c/d by op:
	 *   MODULE_LOAD   a=staging offset b=length
	 *   MODULE_UNLOAD a=module id
	 *   FUNCTION_GET  a=module id, payload: NUL-terminated name
	 *   MEM_ALLOC     a=bytes          MEM_FREE a=address
	 *   STREAM_CREATE a=(int64) priority   STREAM_DESTROY/SYNC: stream
	 *   HTOD          a=dst b=offset c=bytes, format=host buffer id (0: the staging area)
	 *   DTOH          a=src b=offset c=bytes, format=host buffer id (0: the staging area)
	 *   DTOD          a=dst b=src c=bytes
	 *   MEMSET        a=dst b=value c=count, format=width
	 *   LAUNCH        a=function id, b=shared mem, c=nargs, format=flags; payload: wlaunch_dims, then nargs ×
	 *                 (uint32 size, uint32 0, the bytes padded to 8) */
};

struct wlaunch_dims {
	uint32_t grid[3], block[3];
};

struct wcpl_req {
	uint64_t req;
	uint32_t ncmds;
	uint32_t fatal; /* 1: a sticky fault; the worker exits after this record */
};

struct wcpl {
	uint32_t status;
	uint32_t detail_len; /* bytes of detail text following */
	uint32_t data_len;   /* bytes of data following the detail */
	uint32_t pad;
	uint64_t value;
};

/* Data of the worker's first record. */
struct wdev_info {
	char name[256];
	char backend[16];
	uint32_t sm_major, sm_minor;
	uint64_t total_mem;
	uint32_t multiprocessors;
	int32_t prio_least, prio_greatest;
	uint32_t pool_streams;
};

static inline uint32_t
w_align8(uint32_t n)
{
	return (n + 7u) & ~7u;
}

#endif
