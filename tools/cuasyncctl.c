/*
 * cuasyncctl — look at a running cuasyncd.
 *
 *   cuasyncctl [--url URL] status     sessions, requests, errors, per-device workers and memory
 *   cuasyncctl [--url URL] devices    the devices and their backends
 *   cuasyncctl [--url URL] ping       round-trip time
 *
 * URL defaults to $CUASYNC_OPERATOR_URL, else the operator socket of a system daemon
 * (/run/cuasyncd/operator.sock, when it is there), else $CUASYNC_URL or the default socket. Through the
 * daemon's operator endpoint STATUS shows every session; through a client socket only this connection's own.
 * Exit status 0 when the daemon answered.
 */
#include "cuasync.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define OPERATOR_SOCKET "/run/cuasyncd/operator.sock" /* the systemd unit's --operator-url */

static int
die(const char *what, int rc)
{
	fprintf(stderr, "cuasyncctl: %s: %s: %s\n", what, cua_strerror_name(rc),
		cua_last_error()[0] ? cua_last_error() : cua_strerror(rc));
	return 1;
}

static void
print_counts(const char *label, const cua_status_counts *c)
{
	printf("%-9s %llu allocations (%.1f MiB), %llu modules, %llu functions, %llu streams, %llu requests in "
	       "flight\n",
	       label, (unsigned long long)c->allocations, (double)c->alloc_bytes / (1 << 20),
	       (unsigned long long)c->modules, (unsigned long long)c->functions, (unsigned long long)c->streams,
	       (unsigned long long)c->in_flight);
}

int
main(int argc, char **argv)
{
	const char *url = NULL;
	static const struct option opts[] = {{"url", 1, NULL, 'u'}, {"help", 0, NULL, 'h'}, {NULL, 0, NULL, 0}};
	int ch;
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (ch == 'u') {
			url = optarg;
		} else {
			fprintf(ch == 'h' ? stdout : stderr, "usage: cuasyncctl [--url URL] status|devices|ping\n");
			return ch == 'h' ? 0 : 2;
		}
	}
	const char *cmd = optind < argc ? argv[optind] : "status";
	if (url == NULL)
		url = getenv("CUASYNC_OPERATOR_URL");
	if (url == NULL && access(OPERATOR_SOCKET, F_OK) == 0)
		url = "ipc://" OPERATOR_SOCKET;
	cua_client *c;
	int rc = cua_connect(url, &c);
	if (rc != CUA_OK)
		return die("connect", rc);
	if (strcmp(cmd, "status") == 0) {
		cua_daemon_status st;
		if ((rc = cua_status(c, &st)) != CUA_OK)
			return die("status", rc);
		printf("uptime    %.1f s\nsessions  %u (this one included)\nrequests  %llu (%llu errors)\n",
		       (double)st.uptime_ms / 1000, st.sessions, (unsigned long long)st.requests,
		       (unsigned long long)st.errors);
		for (uint32_t d = 0; d < st.ndevices; d++)
			printf("device %u  worker generation %u (%u restarts), %u requests in flight, %llu allocations "
			       "(%.1f MiB)\n",
			       d, st.devices[d].generation, st.devices[d].restarts, st.devices[d].in_flight,
			       (unsigned long long)st.devices[d].allocations,
			       (double)st.devices[d].alloc_bytes / (1 << 20));
		print_counts("total", &st.total);
		if (st.insecure_listeners > 0)
			printf("insecure  %u plain tcp:// listener(s) (--allow-insecure-tcp): unauthenticated, "
			       "unencrypted\n",
			       st.insecure_listeners);
	} else if (strcmp(cmd, "devices") == 0) {
		int n;
		cua_device_count(c, &n);
		for (int d = 0; d < n; d++) {
			cua_device_info in;
			if ((rc = cua_device_get_info(c, d, &in)) != CUA_OK)
				return die("devices", rc);
			printf("device %d  %s  sm_%d%d  %.1f GiB  %d SMs  priorities %d..%d  %s backend  generation "
			       "%u\n",
			       d, in.name, in.sm_major, in.sm_minor, (double)in.total_mem / (1 << 30),
			       in.multiprocessors, in.priority_least, in.priority_greatest, in.backend, in.generation);
		}
	} else if (strcmp(cmd, "ping") == 0) {
		struct timespec a, b;
		clock_gettime(CLOCK_MONOTONIC, &a);
		if ((rc = cua_ping(c)) != CUA_OK)
			return die("ping", rc);
		clock_gettime(CLOCK_MONOTONIC, &b);
		printf("pong in %.1f us\n",
		       (double)(b.tv_sec - a.tv_sec) * 1e6 + (double)(b.tv_nsec - a.tv_nsec) / 1e3);
	} else {
		fprintf(stderr, "cuasyncctl: unknown command '%s' (status, devices, ping)\n", cmd);
		cua_disconnect(c);
		return 2;
	}
	cua_disconnect(c);
	return 0;
}
