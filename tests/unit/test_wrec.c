/* The worker commands' two rows agree: link/wrec.h's WREC_OPS (which commands name a stream in the field after
 * their header: the front-end patches pool slots there) and the worker's wk_cmds (how each command runs). */
#include "config.h"

#include "core.h"

#include <check.h>
#include <stdlib.h>

START_TEST(every_command_has_a_worker_row_that_agrees)
{
	for (uint32_t op = WR_NONE + 1; op < WR_OP_MAX; op++) {
		const struct wk_cmd *c = &wk_cmds[op];
		bool names_stream = (wrec_flags(op) & WRF_STREAM) != 0;
		ck_assert_msg(c->name != NULL, "worker command %u has no row in wk_cmds", op);
		ck_assert_msg(c->fixed >= sizeof(struct wrec_hdr), "%s: fixed size %u", c->name, c->fixed);
		if (names_stream) /* its stream field is a stream the worker issues it on */
			ck_assert_msg(c->stream && c->prep != NULL, "%s names a stream but the worker runs it in order",
				      c->name);
		if (c->stream && !c->held) /* stream work watched through its stream's notice names that stream */
			ck_assert_msg(names_stream, "%s is stream work but WREC_OPS says it names no stream", c->name);
		if (!c->stream)
			ck_assert_msg(c->run != NULL, "%s runs in order but has no handler", c->name);
	}
	ck_assert_uint_eq(wrec_flags(WR_OP_MAX), 0);
	ck_assert_uint_eq(wrec_flags(WR_NONE), 0);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("worker records");
	TCase *tc = tcase_create("rows");
	tcase_add_test(tc, every_command_has_a_worker_row_that_agrees);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
