/*
 * rawsp.c — a raw SP (req0) peer for the integration tests (see rawsp.h).
 */
#include "config.h"

#include "rawsp.h"

#include "cua_wire.h"

#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int
connect_url(const char *url)
{
	int fd = -1;
	if (strncmp(url, "ipc://", 6) == 0) {
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		size_t n = strlen(url + 6);
		ck_assert_uint_lt(n, sizeof(sa.sun_path));
		memcpy(sa.sun_path, url + 6, n);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		ck_assert_int_ge(fd, 0);
		ck_assert_msg(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect %s: %m", url);
		return fd;
	}
	const char *colon = strrchr(url, ':');
	ck_assert_msg(strncmp(url, "tcp://", 6) == 0 && colon != NULL, "raw_connect: %s", url);
	fd = raw_tcp_open(atoi(colon + 1));
	ck_assert_msg(fd >= 0, "connect %s: %m", url);
	return fd;
}

void
raw_connect(struct raw *r, const char *url)
{
	r->fd = connect_url(url);
	static const unsigned char hdr[8] = {0x00, 'S', 'P', 0x00, 0x00, 0x30, 0x00, 0x00}; /* req0 */
	unsigned char got[8];
	ck_assert_int_eq(write(r->fd, hdr, 8), 8);
	struct pollfd p = {r->fd, POLLIN, 0};
	ck_assert_msg(poll(&p, 1, 20000) == 1, "no SP handshake from %s", url);
	ck_assert_int_eq(recv(r->fd, got, 8, MSG_WAITALL), 8);
	ck_assert(got[1] == 'S' && got[2] == 'P');
	r->next_id = 1;
}

int
raw_tcp_open(int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

int
raw_write(struct raw *r, uint32_t op, uint64_t seq, const void *body, int timeout_ms)
{
	cua_wbuf b = {0};
	ck_assert_int_eq(cua_wire_pack_request(cua_wbuf_out(&b), op, seq, body), 0);
	unsigned char frame[4096];
	uint64_t len = b.len + 4;
	ck_assert_uint_le(b.len + 13, sizeof(frame));
	frame[0] = 1;
	for (int i = 0; i < 8; i++)
		frame[1 + i] = (unsigned char)(len >> (56 - 8 * i));
	uint32_t id = 0x80000000u | r->next_id++;
	for (int i = 0; i < 4; i++)
		frame[9 + i] = (unsigned char)(id >> (24 - 8 * i));
	memcpy(frame + 13, b.data, b.len);
	size_t n = b.len + 13, off = 0;
	cua_wbuf_free(&b);
	while (off < n) {
		struct pollfd p = {r->fd, POLLOUT, 0};
		if (poll(&p, 1, timeout_ms) != 1)
			return -1;
		ssize_t w = send(r->fd, frame + off, n - off, MSG_NOSIGNAL);
		if (w <= 0)
			return -1;
		off += (size_t)w;
	}
	return 0;
}

int
raw_read(struct raw *r, int timeout_ms, char *msg, size_t msglen)
{
	unsigned char h[9];
	struct pollfd p = {r->fd, POLLIN, 0};
	if (poll(&p, 1, timeout_ms) != 1 || recv(r->fd, h, 9, MSG_WAITALL) != 9)
		return -1;
	uint64_t len = 0;
	for (int i = 1; i < 9; i++)
		len = len << 8 | h[i];
	ck_assert_uint_ge(len, 4);
	ck_assert_uint_le(len, 64u << 20);
	char *buf = malloc(len);
	ck_assert_ptr_nonnull(buf);
	if (recv(r->fd, buf, len, MSG_WAITALL) != (ssize_t)len) {
		free(buf);
		return -1;
	}
	cua_wire_reply rep;
	cua_err e;
	ck_assert_int_eq(cua_wire_decode_reply(buf + 4, len - 4, &rep, &e), 0);
	int st = (int)rep.status;
	if (msg)
		snprintf(msg, msglen, "%.*s", (int)rep.message.len, (const char *)rep.message.ptr);
	cua_wire_reply_free(&rep);
	free(buf);
	return st;
}

bool
raw_fd_closed(int fd, int timeout_ms)
{
	struct pollfd p = {fd, POLLRDHUP, 0};
	return poll(&p, 1, timeout_ms) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

void
raw_close(struct raw *r)
{
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
}

int
proc_fd_count(int pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	DIR *d = opendir(path);
	if (d == NULL)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}
