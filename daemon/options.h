/*
 * options.h — the daemon's configuration: the options table (what `cuasyncd --help` prints), the command line,
 * the configuration file (conffile.h) under it, and what a reload (SIGHUP) changes.
 */
#ifndef CUAD_OPTIONS_H
#define CUAD_OPTIONS_H

#include "daemon.h"
#include "worker.h"

#include <stddef.h>

/*
 * The command line into c and wo, then (unless this is a worker, which takes everything from its command
 * line) the configuration file under it: --config FILE, else the default file when it exists; the command line
 * wins. Returns -1 to go on, else the exit status to stop with (--help, --version, --cuda-probe, a bad option
 * or file: said on stderr with file:line). Main thread, once, at start.
 */
int options_parse(struct config *c, struct worker_opts *wo, int argc, char **argv);

/*
 * SIGHUP: reads the configuration file again from the defaults and the command line. Limits change at once
 * (fe->cfg under fe->lock): sessions keep what they hold, what they ask for next is checked against the new
 * limits; settings that shaped start-up are named in the log and wait for the next start; a file that does not
 * read is refused whole and the configuration in effect stays. Writes the outcome, for systemd's STATUS=, to
 * status. Main thread; blocks on file I/O.
 */
void options_reload(struct fe *fe, char *status, size_t len);

/*
 * Logs which configuration file options_parse read (--config, else the default when it existed), or, as a
 * warning, that there was none and the defaults and the command line apply: a file in the wrong place must not
 * go unnoticed. Main thread, after options_parse and once logging is set up.
 */
void options_log_config_file(void);

#endif
