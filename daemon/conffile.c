/*
 * conffile.c — the configuration file (see conffile.h).
 */
#include "config.h"

#include "conffile.h"

#include <errno.h>
#include <ini.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct reader {
	FILE *f;
	conf_apply_fn apply;
	void *ud;
	struct conf_strings *keep;
	int line;      /* lines read so far: the handler is called for the last one */
	int err_line;  /* the first error's line (0: none) */
	char why[256]; /* and what it was */
};

static void
fail(struct reader *R, const char *why)
{
	if (R->err_line == 0) {
		R->err_line = R->line;
		snprintf(R->why, sizeof(R->why), "%s", why);
	}
}

static char *
keep_copy(struct conf_strings *keep, const char *s)
{
	char **v = realloc(keep->v, (keep->n + 1) * sizeof(*v));
	if (v == NULL)
		return NULL;
	keep->v = v;
	if ((v[keep->n] = strdup(s)) == NULL)
		return NULL;
	return v[keep->n++];
}

/* inih's handler: 1 to go on, 0 for an error at this line. */
static int
on_pair(void *user, const char *section, const char *name, const char *value)
{
	struct reader *R = user;
	char why[sizeof(R->why)] = "";
	char *v = keep_copy(R->keep, value);
	if (v == NULL)
		snprintf(why, sizeof(why), "out of memory");
	else if (R->apply(R->ud, section, name, v, why, sizeof(why)) == 0)
		return 1;
	fail(R, why[0] ? why : "invalid");
	return 0;
}

/* inih's line reader (fgets-like) that counts lines and ends the file at a line too long for inih's buffer,
 * which inih would otherwise split into several. */
static char *
read_line(char *str, int num, void *stream)
{
	struct reader *R = stream;
	if (R->err_line != 0 || fgets(str, num, R->f) == NULL)
		return NULL;
	R->line++;
	size_t n = strlen(str);
	if (n == (size_t)num - 1 && str[n - 1] != '\n' && !feof(R->f)) {
		char why[64];
		snprintf(why, sizeof(why), "line longer than %d characters", num - 2);
		fail(R, why);
		return NULL;
	}
	return str;
}

int
conf_read(const char *path, conf_apply_fn apply, void *ud, struct conf_strings *keep, char *err, size_t errlen)
{
	struct reader R = {NULL, apply, ud, keep, 0, 0, ""};
	if ((R.f = fopen(path, "r")) == NULL) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	int line = ini_parse_stream(read_line, &R, on_pair, &R);
	bool io = ferror(R.f);
	fclose(R.f);
	if (io) {
		snprintf(err, errlen, "%s: cannot read the file", path);
		return -1;
	}
	if (R.err_line == 0 && line == 0)
		return 0;
	if (R.err_line != 0 && (line == 0 || R.err_line <= line))
		snprintf(err, errlen, "%s:%d: %s", path, R.err_line, R.why);
	else
		snprintf(err, errlen, "%s:%d: not a `key = value` line, a `[section]` or a comment", path, line);
	return -1;
}

void
conf_strings_free(struct conf_strings *keep)
{
	for (size_t i = 0; i < keep->n; i++)
		free(keep->v[i]);
	free(keep->v);
	keep->v = NULL;
	keep->n = 0;
}
