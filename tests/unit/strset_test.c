/*
 * strset_test.c - strset.h: what is added is found again, and only that,
 * across the table's growth; the empty string is a string like another.
 */
#include <stdio.h>
#include <string.h>

#include "../../libcore/base/strset.h"
#include "tap.h"

int main(void)
{
	struct strset set = { { 0 }, NULL, 0, 0 };
	char id[64];
	int added = 0, again = 0, other = 0;
	for (int i = 0; i < 20000; i++) {
		snprintf(id, sizeof id, "snapshot-%d", i);
		added += strset_add(&set, id) == 0;
	}
	for (int i = 0; i < 20000; i++) {
		snprintf(id, sizeof id, "snapshot-%d", i);
		again += strset_add(&set, id) == 1;
		snprintf(id, sizeof id, "snapshot-%dx", i);
		other += strset_add(&set, id) == 0;
	}
	check_int("strset: each new string is added", added, 20000);
	check_int("strset: each is found again", again, 20000);
	check_int("strset: a longer one is another string", other, 20000);
	check_int("strset: the count", (int)set.n, 40000);
	check_int("strset: the empty string, added", strset_add(&set, ""), 0);
	check_int("strset: the empty string, found", strset_add(&set, ""), 1);
	strset_release(&set);
	check_int("strset: released, empty again", strset_add(&set, "snapshot-1"), 0);
	strset_release(&set);
	return tap_end();
}
