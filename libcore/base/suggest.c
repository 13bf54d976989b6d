/* suggest.c - edit distance and the closest candidate (see suggest.h). */
#include "suggest.h"

#include <ctype.h>
#include <string.h>

int core_edit_distance(const char *a, size_t an, const char *b, size_t bn)
{
	/* Three rows of the dynamic-programming table: the swap rule looks
	 * two rows back.  O(an * bn) on words of at most 64 bytes. */
	int rows[3][SUGGEST_MAX_WORD + 1];
	if (an > SUGGEST_MAX_WORD || bn > SUGGEST_MAX_WORD)
		return SUGGEST_FAR;
	int *prev2 = rows[0], *prev = rows[1], *cur = rows[2];
	for (size_t j = 0; j <= bn; j++)
		prev[j] = (int)j;
	for (size_t i = 1; i <= an; i++) {
		cur[0] = (int)i;
		for (size_t j = 1; j <= bn; j++) {
			int ca = tolower((unsigned char)a[i - 1]), cb = tolower((unsigned char)b[j - 1]);
			int d = prev[j - 1] + (ca != cb);
			if (prev[j] + 1 < d)
				d = prev[j] + 1;
			if (cur[j - 1] + 1 < d)
				d = cur[j - 1] + 1;
			if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2])
			    && tolower((unsigned char)a[i - 2]) == cb && prev2[j - 2] + 1 < d)
				d = prev2[j - 2] + 1;
			cur[j] = d;
		}
		int *t = prev2;
		prev2 = prev;
		prev = cur;
		cur = t;
	}
	return prev[bn];
}

const char *core_closest(const char *word, size_t n, const char *const *cands)
{
	const char *best = NULL;
	int best_d = n <= 4 ? 2 : 3;    /* one more than the edits allowed */
	for (const char *const *c = cands; *c; c++) {
		int d = core_edit_distance(word, n, *c, strlen(*c));
		if (d > 0 && d < best_d) {
			best = *c;
			best_d = d;
		}
	}
	return best;
}
