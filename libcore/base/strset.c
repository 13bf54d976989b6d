/*
 * strset.c - a set of strings in one buffer (strset.h): FNV-1a hashes,
 * linear probing, the table doubled at half full.
 */
#include "strset.h"

#include <stdlib.h>
#include <string.h>

static uint64_t hash(const char *s)
{
	uint64_t h = 1469598103934665603u;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211u;
	return h;
}

/* The slot of s, or of the empty one where it would go. */
static size_t find(const struct strset *set, const char *s, uint64_t h)
{
	size_t i = (size_t)h & (set->cap - 1);
	while (set->slot[i] && strcmp(set->bytes.p + set->slot[i] - 1, s))
		i = (i + 1) & (set->cap - 1);
	return i;
}

static int grow(struct strset *set)
{
	size_t cap = set->cap ? set->cap * 2 : 64, old = set->cap;
	uint32_t *was = set->slot;
	if (!(set->slot = calloc(cap, sizeof *set->slot))) {
		set->slot = was;
		return -1;
	}
	set->cap = cap;
	for (size_t i = 0; i < old; i++)
		if (was[i]) {
			const char *s = set->bytes.p + was[i] - 1;
			set->slot[find(set, s, hash(s))] = was[i];
		}
	free(was);
	return 0;
}

int strset_add(struct strset *set, const char *s)
{
	size_t len = strlen(s), i;
	uint64_t h = hash(s);
	if (set->cap && set->slot[find(set, s, h)])
		return 1;
	if (set->bytes.len + len + 1 >= UINT32_MAX)
		return -1;
	if ((set->n + 1) * 2 > set->cap && grow(set))
		return -1;
	if (!set->bytes.max)
		core_buf_init(&set->bytes, CORE_BUF_UNLIMITED);
	size_t at = set->bytes.len;
	if (core_buf_add(&set->bytes, s, len + 1))
		return -1;
	i = find(set, s, h);
	set->slot[i] = (uint32_t)at + 1;
	set->n++;
	return 0;
}

void strset_release(struct strset *set)
{
	core_buf_release(&set->bytes);
	free(set->slot);
	memset(set, 0, sizeof *set);
}
