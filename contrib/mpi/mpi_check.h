/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Shared helpers of the MPI test programs: a CHECK that names the rank and the line and
 * aborts the job, and a data pattern that differs per message.
 */
#ifndef EFA_MPI_CHECK_H
#define EFA_MPI_CHECK_H

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_rank;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "rank %d: FAIL at %s:%d: ", g_rank, __FILE__, __LINE__);  \
			fprintf(stderr, __VA_ARGS__);                                              \
			fprintf(stderr, "\n");                                                     \
			fflush(stderr);                                                            \
			MPI_Abort(MPI_COMM_WORLD, 1);                                              \
		}                                                                                  \
	} while (0)

#define MPI_OK(call)                                                                               \
	do {                                                                                       \
		int rc_ = (call);                                                                  \
		if (rc_ != MPI_SUCCESS) {                                                          \
			char s_[MPI_MAX_ERROR_STRING];                                             \
			int n_ = 0;                                                                \
			MPI_Error_string(rc_, s_, &n_);                                            \
			CHECK(0, "%s: %s", #call, s_);                                             \
		}                                                                                  \
	} while (0)

static inline uint8_t pattern_byte(uint32_t seed, size_t i)
{
	uint32_t x = seed * 2654435761u + (uint32_t)i * 40503u + (uint32_t)(i >> 13);
	return (uint8_t)(x ^ (x >> 11) ^ (x >> 23));
}

static inline void fill(void *buf, size_t len, uint32_t seed)
{
	uint8_t *b = (uint8_t *)buf;
	for (size_t i = 0; i < len; i++)
		b[i] = pattern_byte(seed, i);
}

/* The index of the first wrong byte, or -1. */
static inline long verify(const void *buf, size_t len, uint32_t seed)
{
	const uint8_t *b = (const uint8_t *)buf;
	for (size_t i = 0; i < len; i++)
		if (b[i] != pattern_byte(seed, i))
			return (long)i;
	return -1;
}

#define CHECK_DATA(buf, len, seed, what)                                                           \
	do {                                                                                       \
		long bad_ = verify((buf), (len), (seed));                                          \
		CHECK(bad_ < 0, "%s: byte %ld of %zu differs", (what), bad_, (size_t)(len));       \
	} while (0)

#endif
