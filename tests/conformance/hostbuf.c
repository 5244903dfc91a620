/*
 * hostbuf.c — conformance cases of shared host memory (PROTOCOL.md §4: [R:hostbuf-ipc], [R:hostbuf-range]), driven by
 * raw messages like the rest of the suite, against the daemon of conf_dmn (emulated device). The memfds travel
 * over the fd channel (§9, fdchan.c); [R:hostbuf-ticket] is in fdchan.c.
 */
#include "config.h"

#include "rules.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#define D conf_dmn

/* ------------------------------------------------------------------ §4 shared host memory */

/* A memfd of n bytes, sealed against shrinking when seal. */
static int
memfd(size_t n, bool seal)
{
	int fd = memfd_create("conformance", MFD_ALLOW_SEALING);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)n), 0);
	if (seal)
		ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	return fd;
}

/* A free TCP port on 127.0.0.1 (bound then released). */
static int
free_port(void)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(getsockname(s, (struct sockaddr *)&a, &len), 0);
	close(s);
	return ntohs(a.sin_port);
}

START_TEST(r_hostbuf_ipc)
{
	char tcp[64];
	snprintf(tcp, sizeof(tcp), "tcp://127.0.0.1:%d", free_port());
	struct dmn d;
	dmn_start(&d, (const char *const[]){"--listen", tcp, "--allow-insecure-tcp", NULL});
	int fd = memfd(4096, true);
	struct conn c;
	uint64_t sid, t;
	uint8_t secret[32];
	size_t len;
	chan_sess(&d, &c, &sid, secret); /* over ipc:// */
	int s = chan_auth(&d, sid, secret);
	pass_ok(s, &fd, 1, &t);
	struct reply r;
	expect(&c, OP_HOST_REGISTER, 0, ST_OK, &r, "[uuu]", U(0), t, U(4096));
	ck_assert_uint_ne(r.body->a[0].u, 0);
	reply_free(&r);
	close(s);
	conn_close(&c);
	conn_open(&c, tcp);
	conn_hello_secret(&c, &sid, secret, &len);
	ck_assert_uint_eq(len, 0); /* no fd channel for tcp:// */
	expect(&c, OP_HOST_REGISTER, 0, ST_UNSUPPORTED, NULL, "[uuu]", U(0), U(1), U(4096));
	conn_close(&c);
	close(fd);
	dmn_stop(&d);
}
END_TEST

START_TEST(r_hostbuf_range)
{
	struct conn c;
	uint64_t sid, t[4];
	uint8_t secret[32];
	chan_sess(&D, &c, &sid, secret);
	int s = chan_auth(&D, sid, secret);
	int fd = memfd(8192, true), loose = memfd(8192, false);
	char path[128];
	snprintf(path, sizeof(path), "%s/plain", D.dir);
	int plain = open(path, O_RDWR | O_CREAT, 0600);
	ck_assert_int_ge(plain, 0);
	ck_assert_int_eq(ftruncate(plain, 8192), 0);
	pass_ok(s, (const int[]){plain, loose, fd, fd}, 4, t);
	expect(&c, OP_HOST_REGISTER, 0, ST_BAD_ARGUMENT, NULL, "[uuu]", U(0), t[0], U(8192)); /* not a memfd */
	expect(&c, OP_HOST_REGISTER, 0, ST_BAD_ARGUMENT, NULL, "[uuu]", U(0), t[1], U(8192)); /* not sealed */
	expect(&c, OP_HOST_REGISTER, 0, ST_BAD_ARGUMENT, NULL, "[uuu]", U(0), t[2], U(8193)); /* too small */
	struct reply r;
	expect(&c, OP_HOST_REGISTER, 0, ST_OK, &r, "[uuu]", U(0), t[3], U(8192));
	uint64_t h = r.body->a[0].u, p = alloc(&c, 8192);
	reply_free(&r);
	uint8_t *map = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ck_assert_ptr_ne(map, MAP_FAILED);
	memcpy(map + 4096, "host", 4);
	expect(&c, OP_MEMCPY_HTOD_HOST, 0, ST_OK, NULL, "[uuuuu]", p, U(0), h, U(4096), U(4096));
	expect(&c, OP_MEMCPY_DTOH_HOST, 0, ST_OK, NULL, "[uuuuu]", p, U(0), h, U(0), U(4));
	ck_assert_int_eq(memcmp(map, "host", 4), 0);
	expect(&c, OP_MEMCPY_HTOD_HOST, 0, ST_BAD_ARGUMENT, NULL, "[uuuuu]", p, U(0), h, U(4097), U(4096));
	expect(&c, OP_MEMCPY_DTOH_HOST, 0, ST_BAD_ARGUMENT, NULL, "[uuuuu]", p, U(0), h, U(8192), U(1));
	expect(&c, OP_MEMCPY_DTOH_HOST, 0, ST_BAD_ARGUMENT, NULL, "[uuuuu]", p, U(0), h, U(0), U(8193));
	expect(&c, OP_HOST_UNREGISTER, 0, ST_OK, NULL, "[u]", h);
	munmap(map, 8192);
	close(fd);
	close(loose);
	close(plain);
	close(s);
	conn_close(&c);
}
END_TEST

size_t
hostbuf_rules(struct rule *out)
{
	const struct rule rules[] = {
		{"hostbuf-ipc", r_hostbuf_ipc},
		{"hostbuf-range", r_hostbuf_range},
	};
	memcpy(out, rules, sizeof(rules));
	return sizeof(rules) / sizeof(rules[0]);
}
