/*
 * gen-vectors — writes the .hex files of proto/vectors/ from the table in tools/vectors.c, through the codec.
 *
 * Usage: gen-vectors DIR (`make vectors` passes $(srcdir)/proto/vectors). Every row becomes DIR/<file>.hex;
 * a .hex file in DIR that the table does not name is removed, so the directory is exactly the table.
 * Exit status 0, or 1 with the reason on stderr.
 */
#include "config.h"

#include "vectors.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int
write_row(const char *dir, const struct vec_row *r)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s.hex", dir, r->file);
	char *text = vec_text(r);
	if (text == NULL) {
		fprintf(stderr, "gen-vectors: %s: the codec could not encode the row\n", r->file);
		return 1;
	}
	FILE *f = fopen(path, "w");
	int rc = f == NULL || fputs(text, f) < 0;
	if (f != NULL && fclose(f) != 0)
		rc = 1;
	if (rc)
		perror(path);
	free(text);
	return rc;
}

static int
in_table(const char *name)
{
	size_t n = strlen(name);
	if (n < 5 || strcmp(name + n - 4, ".hex") != 0)
		return 1; /* not a vector: leave it */
	for (size_t i = 0; i < vec_nrows; i++)
		if (strlen(vec_rows[i].file) == n - 4 && strncmp(vec_rows[i].file, name, n - 4) == 0)
			return 1;
	return 0;
}

/* Removes the .hex files of dir that no row names. */
static int
remove_stale(const char *dir)
{
	DIR *d = opendir(dir);
	if (d == NULL) {
		perror(dir);
		return 1;
	}
	int rc = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (in_table(e->d_name))
			continue;
		char path[4096];
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (remove(path) != 0) {
			perror(path);
			rc = 1;
		} else {
			fprintf(stderr, "gen-vectors: removed %s (not in tools/vectors.c)\n", path);
		}
	}
	closedir(d);
	return rc;
}

int
main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 1;
	}
	int rc = remove_stale(argv[1]);
	for (size_t i = 0; i < vec_nrows; i++)
		rc |= write_row(argv[1], &vec_rows[i]);
	return rc ? 1 : 0;
}
