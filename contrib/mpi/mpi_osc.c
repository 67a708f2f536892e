/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * mpi_osc: one-sided MPI, every result checked. Each rank exposes a window of int64
 * elements; with fences and with passive-target locks:
 *  - MPI_Put of a block into every other rank's window, read back by the owner;
 *  - MPI_Get of every other rank's block (small and 1 MiB);
 *  - MPI_Accumulate (MPI_SUM) by all ranks into rank 0's counters;
 *  - MPI_Fetch_and_op (MPI_SUM) by all ranks, several times, under MPI_Win_lock: the
 *    fetched values are distinct and the final value is the total;
 *  - MPI_Compare_and_swap (left out with -nocas: see run_mpi_tests.sh).
 * Which Open MPI component carries it (osc rdma over btl ofi, or osc pt2pt over the
 * MTL) is chosen on the mpirun command line.
 */
#include "mpi_check.h"

static int size;

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	setvbuf(stdout, NULL, _IOLBF, 0); /* each check's line as it passes (mpirun forwards output) */
	MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	int cas = 1;
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "-nocas"))
			cas = 0;
	const size_t block = 1u << 17; /* int64 elements: 1 MiB per rank's block */
	const size_t nwin = block * (size_t)size + 64;
	int64_t *base;
	MPI_Win win;
	MPI_OK(MPI_Win_allocate((MPI_Aint)(nwin * sizeof(int64_t)), sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD,
				&base, &win));
	for (size_t i = 0; i < nwin; i++)
		base[i] = -1;
	int64_t *src = malloc(block * sizeof(int64_t)), *dst = malloc(block * sizeof(int64_t));
	CHECK(src && dst, "malloc");
	const size_t lens[] = {1, 1000, block};

	/* MPI_Put with fences: rank r writes its block at offset r*block of every other rank */
	for (int l = 0; l < 3; l++) {
		const size_t n = lens[l];
		for (size_t i = 0; i < n; i++)
			src[i] = (int64_t)g_rank << 48 | (int64_t)l << 40 | (int64_t)i;
		MPI_OK(MPI_Win_fence(0, win));
		for (int t = 0; t < size; t++)
			if (t != g_rank)
				MPI_OK(MPI_Put(src, (int)n, MPI_INT64_T, t, (MPI_Aint)((size_t)g_rank * block), (int)n,
					       MPI_INT64_T, win));
		MPI_OK(MPI_Win_fence(0, win));
		for (int r = 0; r < size; r++)
			if (r != g_rank)
				for (size_t i = 0; i < n; i++)
					CHECK(base[(size_t)r * block + i] == ((int64_t)r << 48 | (int64_t)l << 40 | (int64_t)i),
					      "MPI_Put of %zu from %d: element %zu", n, r, i);
	}
	if (g_rank == 0)
		printf("MPI_Put (1, 1000, 131072 int64) to every rank, fence: ok\n");

	/* MPI_Get with fences: each rank's own block, written locally, read by the others */
	for (size_t i = 0; i < block; i++)
		base[(size_t)g_rank * block + i] = (int64_t)g_rank * 1000000007 + (int64_t)i;
	MPI_OK(MPI_Win_fence(0, win));
	for (int t = 0; t < size; t++) {
		if (t == g_rank)
			continue;
		for (int l = 0; l < 3; l++) {
			memset(dst, 0, lens[l] * sizeof(int64_t));
			MPI_OK(MPI_Get(dst, (int)lens[l], MPI_INT64_T, t, (MPI_Aint)((size_t)t * block), (int)lens[l],
				       MPI_INT64_T, win));
			MPI_OK(MPI_Win_fence(0, win));
			for (size_t i = 0; i < lens[l]; i++)
				CHECK(dst[i] == (int64_t)t * 1000000007 + (int64_t)i, "MPI_Get of %zu from %d: element %zu",
				      lens[l], t, i);
		}
	}
	if (g_rank == 0)
		printf("MPI_Get (1, 1000, 131072 int64) from every rank, fence: ok\n");

	/* MPI_Accumulate (SUM) of 100 counters at rank 0 by everyone, twice */
	const size_t ctr = block * (size_t)size; /* 64 spare elements at the end */
	MPI_OK(MPI_Win_fence(0, win));
	if (g_rank == 0)
		for (int i = 0; i < 64; i++)
			base[ctr + (size_t)i] = 0;
	MPI_OK(MPI_Win_fence(0, win));
	for (int i = 0; i < 32; i++)
		src[i] = g_rank + 1 + i;
	for (int rep = 0; rep < 2; rep++) {
		MPI_OK(MPI_Accumulate(src, 32, MPI_INT64_T, 0, (MPI_Aint)ctr, 32, MPI_INT64_T, MPI_SUM, win));
		MPI_OK(MPI_Win_fence(0, win));
	}
	if (g_rank == 0) {
		for (int i = 0; i < 32; i++) {
			int64_t want = 0;
			for (int r = 0; r < size; r++)
				want += 2 * (r + 1 + i);
			CHECK(base[ctr + (size_t)i] == want, "MPI_Accumulate: counter %d is %lld, expected %lld", i,
			      (long long)base[ctr + (size_t)i], (long long)want);
		}
		printf("MPI_Accumulate (MPI_SUM, 32 int64, twice by every rank): ok\n");
	}

	/* MPI_Fetch_and_op under passive-target locks: distinct tickets */
	enum { REPS = 50 };
	const MPI_Aint ticket = (MPI_Aint)ctr + 40;
	int64_t one = 1, got = -1;
	int64_t *mine = malloc(sizeof(int64_t) * REPS);
	for (int rep = 0; rep < REPS; rep++) {
		MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
		MPI_OK(MPI_Fetch_and_op(&one, &got, MPI_INT64_T, 0, ticket, MPI_SUM, win));
		MPI_OK(MPI_Win_unlock(0, win));
		mine[rep] = got;
	}
	int64_t *all = malloc(sizeof(int64_t) * REPS * (size_t)size);
	MPI_OK(MPI_Gather(mine, REPS, MPI_INT64_T, all, REPS, MPI_INT64_T, 0, MPI_COMM_WORLD));
	MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
	if (g_rank == 0) {
		const size_t total = (size_t)REPS * (size_t)size;
		uint8_t *seen = calloc(total, 1);
		for (size_t i = 0; i < total; i++) {
			CHECK(all[i] >= 0 && (size_t)all[i] < total && !seen[all[i]],
			      "MPI_Fetch_and_op: ticket %lld twice or out of range", (long long)all[i]);
			seen[all[i]] = 1;
		}
		MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
		int64_t final = base[ticket];
		MPI_OK(MPI_Win_unlock(0, win));
		CHECK(final == (int64_t)total, "MPI_Fetch_and_op: the counter is %lld, expected %zu", (long long)final,
		      total);
		free(seen);
		printf("MPI_Fetch_and_op (MPI_SUM) %d times by every rank under MPI_Win_lock: distinct tickets: ok\n",
		       REPS);
	}
	free(all);
	free(mine);

	if (cas) {
		/* MPI_Compare_and_swap: every rank tries to claim slot ctr+50 once; exactly one wins */
		const MPI_Aint slot = (MPI_Aint)ctr + 50;
		MPI_OK(MPI_Win_fence(0, win));
		if (g_rank == 0)
			base[slot] = -1;
		MPI_OK(MPI_Win_fence(0, win));
		int64_t cmp = -1, me = g_rank, old = 0;
		MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
		MPI_OK(MPI_Compare_and_swap(&me, &cmp, &old, MPI_INT64_T, 0, slot, win));
		MPI_OK(MPI_Win_unlock(0, win));
		int won = old == -1, winners = 0;
		MPI_OK(MPI_Allreduce(&won, &winners, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
		CHECK(winners == 1, "MPI_Compare_and_swap: %d ranks won", winners);
		if (g_rank == 0)
			printf("MPI_Compare_and_swap by every rank: exactly one winner: ok\n");
	}
	MPI_OK(MPI_Win_fence(0, win));
	MPI_Win_free(&win);
	free(src);
	free(dst);
	if (g_rank == 0)
		printf("mpi_osc: all checks passed on %d ranks\n", size);
	MPI_Finalize();
	return 0;
}
