/*
 * attach.h - a file made a part of a user message (agent-run -a FILE;
 * docs/agent-run.md, "Attachments"): its type told by its content with
 * libmagic (loaded on first use, as libcurl is), an image, a PDF or audio
 * as a media part with a data: URL, a text file as a text part.
 *
 * The one file that includes magic.h.  Nothing here prints or exits.
 */
#ifndef CORE_ATTACH_H
#define CORE_ATTACH_H

#include <stddef.h>

#include <jansson.h>

#include "status.h"

#define ATTACH_MAX (20u * 1024 * 1024)         /* one file's bytes */
#define ATTACH_TOTAL_MAX (50u * 1024 * 1024)   /* every file's, together */

/*
 * The part for path ("-": stdin) in *part (a new reference):
 *   {"media": {"contentType": TYPE, "url": "data:TYPE;base64,..."}} for
 *   image/..., application/pdf and audio/... (audio/x-wav read as
 *   audio/wav);
 *   {"text": "<file name=\"NAME\">\nCONTENT\n</file>"} for text (text/...,
 *   JSON, XML, scripts) that is UTF-8, NAME the path as given ("stdin"
 *   for "-").
 * *used counts the bytes read so far (ATTACH_TOTAL_MAX bounds it).
 * Errors: CORE_ENOTFOUND (no such file), CORE_ESYS, CORE_EUSAGE for a
 * file that cannot be attached (over ATTACH_MAX or what is left of the
 * total, empty, a type that is none of those, text that is not UTF-8)
 * or libmagic that cannot be loaded, CORE_ENOMEM; each message names the
 * file.
 */
enum core_status attach_part(const char *path, size_t *used, json_t **part,
                             struct core_err *e);

#endif
