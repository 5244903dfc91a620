/*
 * gang.c — tenant processes started in step (bench.h): forked, prepared, released together, their spans and
 * results read back through pipes. Also the kernel specification and the clock every part shares.
 */
#include "bench.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

double
bench_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

void
bench_percentiles(double *v, size_t n, struct tenant_result *out)
{
	qsort(v, n, sizeof(*v), cmp_double);
	out->p50 = v[n / 2];
	out->p99 = v[n * 99 / 100];
	out->ok = 1;
}

int
bench_kernel_parse(const char *spec, size_t len, struct bench_kernel *k)
{
	char s[64];
	if (len == 0 || len >= sizeof(s))
		return -1;
	memcpy(s, spec, len);
	s[len] = '\0';
	memset(k, 0, sizeof(*k));
	k->grid = 1;
	k->block = 32;
	char *end = NULL;
	if (strcmp(s, "empty") == 0) {
		k->fn = "empty_kernel";
		snprintf(k->label, sizeof(k->label), "empty");
	} else if (strncmp(s, "spin:", 5) == 0) {
		k->fn = "spin";
		k->cycles = strtoll(s + 5, &end, 10);
		if (end == s + 5 || *end != '\0' || k->cycles < 0)
			return -1;
		snprintf(k->label, sizeof(k->label), "spin %lld cycles", (long long)k->cycles);
	} else if (strncmp(s, "axpy:", 5) == 0) {
		k->fn = "axpy";
		k->n = strtoull(s + 5, &end, 10);
		if (end == s + 5 || *end != '\0' || k->n == 0 || k->n > (1ull << 32))
			return -1;
		k->block = 256;
		uint64_t blocks = (k->n + 255) / 256;
		k->grid = blocks > 1024 ? 1024 : (unsigned)blocks; /* grid-stride beyond 1024 blocks */
		snprintf(k->label, sizeof(k->label), "axpy %llu", (unsigned long long)k->n);
	} else
		return -1;
	return 0;
}

int
tenant_ready(struct tenant_gate *g)
{
	char x;
	g->signalled = 1;
	int r = write(g->ready_fd, "r", 1) == 1 ? 0 : -1;
	close(g->ready_fd); /* so that the parent sees EOF, not a hang, when a tenant dies before being ready */
	if (r == 0 && read(g->go_fd, &x, 1) != 1)
		r = -1;
	return r;
}

static pid_t gang_parent; /* the process that forks the tenants */

/* Body of a forked tenant; never returns. */
static _Noreturn void
tenant_main(tenant_fn fn, void *arg, int k, int ready[2], int go[2], int res[2])
{
	/* Tenants die with the bench (an interrupted run must not leave them loading the GPU). */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != gang_parent)
		_exit(1);
	close(ready[0]);
	close(go[1]);
	close(res[0]);
	struct tenant_gate g = {ready[1], go[0], 0};
	struct tenant_result out;
	memset(&out, 0, sizeof(out));
	fn(arg, k, &g, &out);
	if (!g.signalled) {
		if (write(ready[1], "f", 1) != 1)
			_exit(1);
		close(ready[1]);
	}
	if (write(res[1], &out, sizeof(out)) != (ssize_t)sizeof(out))
		_exit(1);
	_exit(0);
}

/* Reads exactly len bytes from fd within the deadline. Returns 0, or -1 on EOF, error or timeout. */
static int
read_by(int fd, void *buf, size_t len, double deadline)
{
	size_t got = 0;
	while (got < len) {
		double left = deadline - bench_now();
		struct pollfd p = {fd, POLLIN, 0};
		if (left <= 0 || poll(&p, 1, (int)(left * 1000) + 1) < 0) {
			if (left > 0 && errno == EINTR)
				continue;
			return -1;
		}
		if (p.revents == 0)
			continue;
		ssize_t n = read(fd, (char *)buf + got, len - got);
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

/* Reads the P results after go; folds them into *rate and *first. Returns 0, or -1 with err set. */
static int
collect(int fd, int P, double deadline, double *rate, struct tenant_result *first, char *err, size_t errlen)
{
	double t0 = 0, t1 = 0, launches = 0;
	int failed = 0;
	for (int i = 0; i < P; i++) {
		struct tenant_result r;
		if (read_by(fd, &r, sizeof(r), deadline) != 0) {
			snprintf(err, errlen, "a tenant died or timed out");
			return -1;
		}
		if (!r.ok) {
			if (!failed)
				snprintf(err, errlen, "%s", r.msg);
			failed = 1;
			continue;
		}
		if (first != NULL && i == 0)
			*first = r;
		t0 = launches == 0 || r.t0 < t0 ? r.t0 : t0;
		t1 = r.t1 > t1 ? r.t1 : t1;
		launches += r.launches;
	}
	*rate = t1 > t0 ? launches / (t1 - t0) : 0;
	return failed ? -1 : 0;
}

int
gang_run(int P, tenant_fn fn, void *arg, double timeout_s, double *rate, struct tenant_result *first, char *err,
	 size_t errlen)
{
	int ready[2], go[2], res[2], r = -1;
	pid_t *pids = calloc((size_t)P, sizeof(*pids));
	if (pids == NULL || pipe(ready) != 0 || pipe(go) != 0 || pipe(res) != 0) {
		snprintf(err, errlen, "out of memory or pipes");
		free(pids);
		return -1;
	}
	fflush(stdout);
	fflush(stderr);
	gang_parent = getpid();
	for (int k = 0; k < P; k++)
		if ((pids[k] = fork()) == 0)
			tenant_main(fn, arg, k, ready, go, res);
	close(ready[1]);
	close(go[0]);
	close(res[1]);
	double deadline = bench_now() + timeout_s;
	char x;
	for (int k = 0; k < P; k++)
		if (read_by(ready[0], &x, 1, deadline) != 0) {
			snprintf(err, errlen, "a tenant died or timed out before it was ready");
			goto out;
		}
	for (int k = 0; k < P; k++) /* best effort: a tenant that failed to prepare has gone (its result says why) */
		if (write(go[1], "g", 1) != 1)
			break;
	r = collect(res[0], P, deadline, rate, first, err, errlen);
out:
	for (int k = 0; k < P; k++)
		if (pids[k] > 0) {
			if (r != 0)
				kill(pids[k], SIGKILL);
			waitpid(pids[k], NULL, 0);
		}
	close(ready[0]);
	close(go[1]);
	close(res[0]);
	free(pids);
	return r;
}
