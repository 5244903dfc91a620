/*
 * conffile.h — the configuration file: INI, read with inih (Debian's libinih).
 *
 * Why INI and inih: the file holds flat settings named after the command-line options (`session-mem = 25%`
 * under `[daemon]`), which INI says with no ceremony and every operator reads at a glance; inih is small,
 * well kept, packaged by Debian, allocates nothing behind our back and reports the line of every error.
 * libconfig and YAML buy nesting we do not need at the price of a larger parser facing a root-owned file.
 *
 * Format (cuasyncd.conf(5)): `#` or `;` starts a comment line; `[daemon]` holds `key = value` pairs whose keys
 * are the long options of `cuasyncd --help` without the dashes; a key that may be repeated on the command line
 * (`listen`) may be repeated in the file; `[tenant NAME]` sections describe tenants (tenant.h). Lines are at most 198 characters (inih's buffer as Debian builds it:
 * longer lines are refused rather than split).
 */
#ifndef CUAD_CONFFILE_H
#define CUAD_CONFFILE_H

#include <stddef.h>

/* Called for each key, with its section ("daemon", "tenant research"), in file order. Returns 0, or -1 with
 * what was wrong in why (an unknown section or key, a bad value; the caller prefixes file:line). */
typedef int (*conf_apply_fn)(void *ud, const char *section, const char *key, const char *value, char *why,
			     size_t whylen);

/* Values handed to apply live until conf_strings_free: string options may point into them. */
struct conf_strings {
	char **v;
	size_t n;
};

/*
 * Reads path, handing every key to apply (with a copy of its value kept in *keep). Returns 0, or
 * -1 with "path:line: what was wrong" in err (unreadable file, a line too long, a line that is no setting, what
 * apply refused): the first error of the file; apply may have been called for the lines before
 * it. Blocks on file I/O; any thread.
 */
int conf_read(const char *path, conf_apply_fn apply, void *ud, struct conf_strings *keep, char *err, size_t errlen);

void conf_strings_free(struct conf_strings *keep);

#endif
