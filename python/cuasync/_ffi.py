"""The C side: libcuasync's declarations (a copy of client/cuasync.h's, for cffi's ABI mode) and the library.

ABI mode compiles nothing: the declarations below must match client/cuasync.h exactly (struct layouts
included); python/tests/test_cuasync.py::test_cdef_matches_header compares them with the header through the
C compiler when there is one.

The library is found, in order, through $CUASYNC_LIB (a path), the build tree beside this source tree
(build/client/.libs/libcuasync.so.0), and the system's library name (libcuasync.so.0).
"""
import os

import cffi

CDEF = """
typedef struct cua_client cua_client;
typedef struct cua_launch cua_launch;
typedef struct cua_future cua_future;
typedef struct cua_module { uint64_t id; } cua_module;
typedef struct cua_function { uint64_t id; } cua_function;
typedef struct cua_stream { uint64_t id; } cua_stream;
typedef struct cua_event { uint64_t id; } cua_event;
typedef uint64_t cua_deviceptr;

typedef struct cua_device_info {
    int index;
    char name[257];
    int sm_major, sm_minor;
    uint64_t total_mem;
    int multiprocessors;
    int priority_least, priority_greatest;
    char backend[17];
    uint32_t generation;
    uint32_t max_param_bytes;
    uint32_t max_shared_optin;
    int cluster_launch;
    int cooperative_launch;
} cua_device_info;

typedef struct cua_status_counts {
    uint64_t allocations, alloc_bytes, modules, functions, streams, in_flight;
} cua_status_counts;

struct cua_daemon_status_device {
    uint32_t generation, restarts, in_flight;
    uint64_t allocations, alloc_bytes;
};
typedef struct cua_daemon_status {
    uint64_t uptime_ms;
    uint32_t sessions;
    uint64_t requests, errors;
    uint32_t ndevices;
    struct cua_daemon_status_device devices[64];
    cua_status_counts session;
    cua_status_counts total;
    uint32_t insecure_listeners;
    uint64_t drained;
} cua_daemon_status;

typedef struct cua_launch_config {
    uint32_t grid[3];
    uint32_t block[3];
    uint32_t shared_mem_bytes;
} cua_launch_config;

const char *cua_strerror_name(int status);
const char *cua_strerror(int status);
const char *cua_last_error(void);

int cua_connect(const char *url, cua_client **out);
void cua_disconnect(cua_client *c);
void cua_set_timeout(cua_client *c, int timeout_ms);
int cua_ping(cua_client *c);
int cua_status(cua_client *c, cua_daemon_status *out);
int cua_device_count(cua_client *c, int *n);
int cua_device_get_info(cua_client *c, int dev, cua_device_info *out);

int cua_module_load(cua_client *c, int dev, const void *image, size_t len, cua_module *out);
int cua_module_load_file(cua_client *c, int dev, const char *path, cua_module *out);
int cua_module_unload(cua_client *c, cua_module m);
int cua_module_get_function(cua_client *c, cua_module m, const char *name, cua_function *out);
int cua_function_get_params(cua_client *c, cua_function f, uint32_t *n, uint32_t *offsets, uint32_t *sizes);

int cua_mem_alloc(cua_client *c, int dev, size_t bytes, cua_deviceptr *out);
int cua_mem_free(cua_client *c, cua_deviceptr p);
int cua_memcpy_htod(cua_client *c, cua_deviceptr dst, const void *src, size_t bytes);
int cua_memcpy_dtoh(cua_client *c, void *dst, cua_deviceptr src, size_t bytes);
int cua_memcpy_dtod(cua_client *c, cua_deviceptr dst, cua_deviceptr src, size_t bytes);
int cua_memset(cua_client *c, cua_deviceptr dst, uint32_t value, unsigned width, size_t count);
int cua_memcpy_htod_on(cua_client *c, cua_deviceptr dst, const void *src, size_t bytes, cua_stream s);
int cua_memcpy_dtoh_on(cua_client *c, void *dst, cua_deviceptr src, size_t bytes, cua_stream s);

int cua_host_alloc(cua_client *c, int dev, size_t bytes, void **out);
int cua_host_free(cua_client *c, void *p);

int cua_stream_create(cua_client *c, int dev, int priority, cua_stream *out);
int cua_stream_destroy(cua_client *c, cua_stream s);
int cua_stream_synchronize(cua_client *c, cua_stream s);
int cua_synchronize(cua_client *c);

int cua_event_create_on(cua_client *c, int dev, unsigned flags, cua_event *out);
int cua_event_destroy(cua_client *c, cua_event ev);
int cua_event_record(cua_client *c, cua_event ev, cua_stream s);
int cua_stream_wait_event(cua_client *c, cua_stream s, cua_event ev);
int cua_event_synchronize(cua_client *c, cua_event ev);
int cua_event_query(cua_client *c, cua_event ev, int *ready);
int cua_event_elapsed_ms(cua_client *c, cua_event start, cua_event end, float *ms);

cua_launch *cua_launch_new(cua_client *c, cua_function f);
int cua_launch_push_arg(cua_launch *l, const void *value, size_t size);
int cua_launch_push_device_ptr(cua_launch *l, cua_deviceptr p);
int cua_launch_set_config(cua_launch *l, cua_launch_config cfg);
int cua_launch_set_stream(cua_launch *l, cua_stream s);
int cua_launch_submit(cua_launch *l, cua_future **out);
void cua_launch_free(cua_launch *l);

int cua_future_wait(cua_future *f, int timeout_ms);
int cua_future_poll(cua_future *f);
int cua_future_status(cua_future *f);
const char *cua_future_error(cua_future *f);
void cua_future_free(cua_future *f);

int cua_client_fd(cua_client *c);
void cua_client_fd_clear(cua_client *c);
"""

SONAME = "libcuasync.so.0"

ffi = cffi.FFI()
ffi.cdef(CDEF)


def library_candidates():
    """Where the library is looked for, in order."""
    env = os.environ.get("CUASYNC_LIB")
    if env:
        return [env]  # asked for: no fallback that would hide a wrong path
    here = os.path.dirname(os.path.abspath(__file__))
    tree = os.path.join(here, os.pardir, os.pardir, "build", "client", ".libs", SONAME)
    return [os.path.normpath(tree), SONAME]


def _open():
    errors = []
    for cand in library_candidates():
        if os.sep in cand and not os.path.exists(cand):
            errors.append("%s: no such file" % cand)
            continue
        try:
            # RTLD_NODELETE: never unmapped. cffi dlcloses the library when its lib object is collected, at
            # the latest while the interpreter exits, and NNG's threads (libcuasync's dependency) outlive that:
            # a thread that woke in unmapped code (a client left open re-dialing a daemon that went) ended the
            # exit with SIGSEGV.
            return ffi.dlopen(cand, ffi.RTLD_NOW | ffi.RTLD_NODELETE)
        except OSError as e:
            errors.append(str(e))
    raise ImportError("cuasync: cannot load libcuasync (set $CUASYNC_LIB to its path): " + "; ".join(errors))


lib = _open()
