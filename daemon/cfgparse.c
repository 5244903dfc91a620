/*
 * cfgparse.c — the parsers of option values, the command line's, the configuration file's and the tenants'
 * alike (daemon.h). Pure functions, below everything that reads options.
 */
#include "config.h"

#include "daemon.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
