/*
 * harness.h — integration-test helpers: start the real cuasyncd on a private ipc socket and stop it,
 * checking it exits cleanly (under ASan a leak makes that exit status non-zero).
 */
#ifndef CUA_HARNESS_H
#define CUA_HARNESS_H

#include "cuasync.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct daemon {
	pid_t pid;
	char dir[256];
	char url[320];
	char op_url[320]; /* the operator endpoint (--operator-url): STATUS there shows every session */
	char log[320];
};

/* Starts cuasyncd with the emulated backend and extra arguments (NULL-terminated). Returns when it serves. */
void daemon_start(struct daemon *d, const char *const *extra);
/* SIGTERM, wait, assert a clean exit; removes the private directory. */
void daemon_stop(struct daemon *d);
/* The pid of the daemon's worker for device dev, or -1. Beside a spare worker (--spare-worker, started for the
 * next generation) the one of the lowest generation, which serves. */
pid_t daemon_worker_pid(const struct daemon *d, int dev);
/* The pid of the daemon's worker for device dev started as generation gen (a spare: the serving one's + 1), or -1. */
pid_t daemon_worker_pid_of_gen(const struct daemon *d, int dev, unsigned gen);
/* The build directory: $CUA_TEST_BUILDDIR or the one configured. */
const char *builddir(void);
/* Backend name the tests run against: $CUA_TEST_BACKEND (cuda on the GPU machine) or emu. */
const char *test_backend(void);

/* Connects to d, failing the test on error. */
cua_client *connect_to(const struct daemon *d);
/* Connects to d's operator endpoint (sees every session in STATUS). */
cua_client *connect_operator(const struct daemon *d);
/* Loads the test kernels (fatbin from the build, or the emulated device's kernel list). */
cua_module load_kernels(cua_client *c);
/* The same, returning the status instead of failing the test. */
int load_kernels_rc(cua_client *c, cua_module *m);
/* Whether the tests run on a GPU (test_backend() is cuda). */
bool on_gpu(void);
/* The feature kernels (issue 13): tests/kernels/feature_kernels.fatbin on a GPU, else image (the emulated
 * device's image text, naming the kernels and globals the caller uses; NULL in GPU-only tests). */
cua_module load_features(cua_client *c, const char *image);
/* Submits l (consumed), waits for it and returns its status; the message (submission's or the future's) in msg. */
int submit_status(cua_launch *l, char *msg, size_t len);
cua_function get_fn(cua_client *c, cua_module m, const char *name);
/* A launch of f with the given config (1-D). */
cua_launch *launch_1d(cua_client *c, cua_function f, unsigned grid, unsigned block);
/* Submits l (consumed), waits for it and fails the test unless it ran. */
void launch_and_wait(cua_launch *l);
/* Waits until the daemon's status satisfies pred (polling STATUS; bounded by 20 s). */
bool wait_status(cua_client *c, bool (*pred)(const cua_daemon_status *s, void *ud), void *ud, cua_daemon_status *out);
/* Spin argument that runs about ms milliseconds on the backend. */
long long spin_cycles(unsigned ms);
/* Submits a spin kernel of about ms milliseconds on stream s (0: the pool); the future, not waited for. */
cua_future *submit_spin(cua_client *c, cua_function spin, unsigned ms, cua_stream s);
/* wait_status predicate: device 0 restarted at least *(uint32_t *)ud times. */
bool status_restarted(const cua_daemon_status *s, void *ud);

/* The port of d's --metrics-listen http://127.0.0.1:0 endpoint, from its log; -1 when none is logged. */
int daemon_metrics_port(const struct daemon *d);
/* GET path from the metrics endpoint on 127.0.0.1:port: the HTTP status, the body in a malloc'd *body. */
int metrics_get(int port, const char *path, char **body);
/* The same with `Authorization: Bearer bearer` (NULL: none): an operator's scrape (--metrics-token-file). */
int metrics_get_as(int port, const char *path, const char *bearer, char **body);
/* The value of series (name with its labels, exactly as written) in Prometheus text; -1 when absent. */
double metric_value(const char *text, const char *series);

/* Passes fd into session over the fd channel beside the ipc:// socket of ipc_url (PROTOCOL.md §9), authenticated
 * with HELLO's 32-byte fd_secret (the connection is kept for the next call of the same session); returns its
 * ticket for HOST_REGISTER. Asserts. One thread at a time. */
uint64_t fdchan_pass_one(const char *ipc_url, uint64_t session, const void *secret, int fd);

/* True when file (at most 1 MiB of it) contains text. */
bool file_has(const char *file, const char *text);

#define CK(call)                                                                                                       \
	do {                                                                                                           \
		int rc_ = (call);                                                                                      \
		ck_assert_msg(rc_ == CUA_OK, "%s: %s: %s", #call, cua_strerror_name(rc_), cua_last_error());           \
	} while (0)

#endif
