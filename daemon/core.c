/*
 * core.c — the front-end core's state: defaults, initialisation.
 */
#include "config.h"

#include "daemon.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void
config_defaults(struct config *c)
{
	memset(c, 0, sizeof(*c));
	c->backend = "auto";
	c->emu_sm = 90;
	c->emu_devices = 1;
	c->emu_mem = 1ull << 30;
	c->pool_streams = 4;
	c->contexts = 512;
	c->max_message = (64u << 20) + (1u << 20);
	c->staging_bytes = 256ull << 20;
	c->ring_bytes = 16u << 20;
	c->session_handles = 65536;
	c->session_graphs = 256;
	c->session_graph_nodes = 65536;
	/* A quarter of each device's memory: four tenants fit side by side, and one careless tenant cannot take the
	 * device from the others; raise it (--session-mem) when fewer share a GPU. */
	c->session_mem_pct = 25;
	c->session_streams = 64;
	c->session_events = 4096;
	c->session_modules = 256;
	c->session_module_bytes = 256ull << 20;
	c->session_host_bytes = 1ull << 30;
	c->session_inflight = 65536;
	c->session_window = 8;
	c->session_pending = 64; /* contexts / 8: config_settle derives it again when --contexts changed it */
	c->session_reply_bytes = 64ull << 20;
	c->send_timeout_ms = 10000;
	c->contexts_max = 8192;
	c->seq_gap_timeout_ms = 5000;
	c->ready_fd = -1;
	c->ipc_mode = -1;
	c->operator_mode = 0600;
	c->isolation = ISO_SHARED;
	c->isolation_pool = 1;
	c->scrub = true;
	c->watchdog_s = 5;     /* well above a scheduling hiccup of a busy host, well below a client's patience */
	c->drain_timeout = 30; /* a systemd stop waits 90 s before SIGKILL */
	c->hello_timeout = 10;
}

void
fe_init(struct fe *fe)
{
	memset(fe, 0, sizeof(*fe));
	config_defaults(&fe->cfg);
	pthread_mutex_init(&fe->lock, NULL);
	pthread_cond_init(&fe->cond, NULL);
	TAILQ_INIT(&fe->sessions);
	TAILQ_INIT(&fe->ready);
	TAILQ_INIT(&fe->zombies);
	TAILQ_INIT(&fe->gaps);
	STAILQ_INIT(&fe->tomb_fifo);
	fe->start_ms = cua_now_ms();
}

void
config_settle(struct config *c, bool pending_given)
{
	if (!pending_given)
		c->session_pending = c->contexts / 8 > 16 ? c->contexts / 8 : 16;
	if (c->contexts_max < c->contexts)
		c->contexts_max = c->contexts;
}

/* "64M", "1G", "2T", "4096": bytes. Returns -1 on a malformed value. */
int
cfg_parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-') /* strtoull takes "-1" for a huge number */
		return -1;
	uint64_t mul = 1;
	switch (*end) {
	case '\0': break;
	case 'k':
	case 'K':
		mul = 1ull << 10;
		end++;
		break;
	case 'm':
	case 'M':
		mul = 1ull << 20;
		end++;
		break;
	case 'g':
	case 'G':
		mul = 1ull << 30;
		end++;
		break;
	case 't':
	case 'T':
		mul = 1ull << 40;
		end++;
		break;
	default: return -1;
	}
	if (*end != '\0' || (v && mul > UINT64_MAX / v))
		return -1;
	*out = v * mul;
	return 0;
}

int
cfg_parse_uint(const char *s, unsigned lo, unsigned hi, unsigned *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < (long)lo || v > (long)hi)
		return -1;
	*out = (unsigned)v;
	return 0;
}

/* "25%" (a share of each device's memory), "4G" (bytes) or "0" (no limit). Returns -1 when malformed. */
int
cfg_parse_share(const char *s, uint64_t *bytes, unsigned *pct)
{
	size_t n = strlen(s);
	if (n > 1 && s[n - 1] == '%') {
		char num[16];
		if (n > sizeof(num))
			return -1;
		memcpy(num, s, n - 1);
		num[n - 1] = '\0';
		*bytes = 0;
		return cfg_parse_uint(num, 1, 100, pct);
	}
	*pct = 0;
	return cfg_parse_size(s, bytes);
}
