/*
 * suggest.h - "did you mean": the closest word of a list to a mistyped one.
 *
 * Used wherever a user types a name from a known set (options, agent-snap
 * subcommands, model providers), so every "did you mean" in agentkit
 * follows one rule.  Nothing here allocates.
 */
#ifndef CORE_SUGGEST_H
#define CORE_SUGGEST_H

#include <stddef.h>

/*
 * The edit distance between a[0..an) and b[0..bn), counting an insertion,
 * a deletion, a substitution or a swap of two neighbouring characters as
 * one edit (optimal string alignment), compared without case.  Words longer
 * than SUGGEST_MAX_WORD bytes are never close: the result is then
 * SUGGEST_FAR.
 */
#define SUGGEST_MAX_WORD 64
#define SUGGEST_FAR 1000
int core_edit_distance(const char *a, size_t an, const char *b, size_t bn);

/*
 * The candidate (NULL-terminated list; borrowed, returned as given) closest
 * to word[0..n), or NULL when none is close enough to be a typo: at most one
 * edit for words of up to four characters, two for longer ones, and never
 * the word itself.  Ties go to the earlier candidate.
 */
const char *core_closest(const char *word, size_t n, const char *const *cands);

#endif
