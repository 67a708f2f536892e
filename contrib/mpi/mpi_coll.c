/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * mpi_coll: collectives over the provider (pml cm: Open MPI's collectives are built on
 * point-to-point), every result computed independently and checked, at sizes from one
 * element to several MiB (so eager, medium and long protocols all carry them):
 * MPI_Bcast from every root, MPI_Reduce (MPI_SUM of int64, MPI_MAX of double) to every
 * root, MPI_Allreduce, MPI_Alltoall, MPI_Allgather, MPI_Barrier. Any number of ranks.
 */
#include "mpi_check.h"

static int size;

static int64_t val(int rank, size_t i) { return (int64_t)((uint64_t)rank * 1000003u + i * 7u) - 5000; }

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	setvbuf(stdout, NULL, _IOLBF, 0); /* each check's line as it passes (mpirun forwards output) */
	MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	const size_t counts[] = {1, 100, 2000, 70000, 600000}; /* int64 elements: 8 B .. 4.8 MB */
	const int nc = (int)(sizeof counts / sizeof counts[0]);
	const size_t max = counts[nc - 1];
	int64_t *a = malloc(max * sizeof(int64_t)), *b = malloc(max * sizeof(int64_t));
	double *d = malloc(max * sizeof(double)), *e = malloc(max * sizeof(double));
	uint8_t *bytes = malloc(max * 8);
	CHECK(a && b && d && e && bytes, "malloc");

	for (int c = 0; c < nc; c++) {
		const size_t n = counts[c];
		/* MPI_Bcast from every root */
		for (int root = 0; root < size; root++) {
			const uint32_t seed = (uint32_t)(root * 77 + c);
			if (g_rank == root)
				fill(bytes, n * 8, seed);
			else
				memset(bytes, 0, n * 8);
			MPI_OK(MPI_Bcast(bytes, (int)(n * 8), MPI_BYTE, root, MPI_COMM_WORLD));
			CHECK_DATA(bytes, n * 8, seed, "MPI_Bcast");
		}
		/* MPI_Reduce to every root, MPI_SUM (int64) and MPI_MAX (double) */
		for (size_t i = 0; i < n; i++) {
			a[i] = val(g_rank, i);
			d[i] = (double)((g_rank * 37 + (int)i) % (size + 3)) - 1.5;
		}
		for (int root = 0; root < size; root++) {
			memset(b, 0, n * sizeof(int64_t));
			MPI_OK(MPI_Reduce(a, b, (int)n, MPI_INT64_T, MPI_SUM, root, MPI_COMM_WORLD));
			MPI_OK(MPI_Reduce(d, e, (int)n, MPI_DOUBLE, MPI_MAX, root, MPI_COMM_WORLD));
			if (g_rank != root)
				continue;
			for (size_t i = 0; i < n; i++) {
				int64_t sum = 0;
				double mx = -1e300;
				for (int r = 0; r < size; r++) {
					sum += val(r, i);
					const double v = (double)((r * 37 + (int)i) % (size + 3)) - 1.5;
					mx = v > mx ? v : mx;
				}
				CHECK(b[i] == sum, "MPI_Reduce(SUM) of %zu to %d: element %zu is %lld, expected %lld", n, root,
				      i, (long long)b[i], (long long)sum);
				CHECK(e[i] == mx, "MPI_Reduce(MAX) of %zu to %d: element %zu is %g, expected %g", n, root, i,
				      e[i], mx);
			}
		}
		/* MPI_Allreduce */
		memset(b, 0, n * sizeof(int64_t));
		MPI_OK(MPI_Allreduce(a, b, (int)n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD));
		for (size_t i = 0; i < n; i++) {
			int64_t sum = 0;
			for (int r = 0; r < size; r++)
				sum += val(r, i);
			CHECK(b[i] == sum, "MPI_Allreduce of %zu: element %zu is %lld, expected %lld", n, i,
			      (long long)b[i], (long long)sum);
		}
		/* MPI_Alltoall and MPI_Allgather: n / size elements per rank */
		const size_t per = n / (size_t)size;
		if (per) {
			for (int r = 0; r < size; r++)
				for (size_t i = 0; i < per; i++)
					a[(size_t)r * per + i] = (int64_t)g_rank << 40 | (int64_t)r << 24 | (int64_t)i;
			memset(b, 0, n * sizeof(int64_t));
			MPI_OK(MPI_Alltoall(a, (int)per, MPI_INT64_T, b, (int)per, MPI_INT64_T, MPI_COMM_WORLD));
			for (int r = 0; r < size; r++)
				for (size_t i = 0; i < per; i++)
					CHECK(b[(size_t)r * per + i] == ((int64_t)r << 40 | (int64_t)g_rank << 24 | (int64_t)i),
					      "MPI_Alltoall of %zu per rank: block %d element %zu", per, r, i);
			for (size_t i = 0; i < per; i++)
				a[i] = (int64_t)g_rank << 40 | (int64_t)i;
			memset(b, 0, n * sizeof(int64_t));
			MPI_OK(MPI_Allgather(a, (int)per, MPI_INT64_T, b, (int)per, MPI_INT64_T, MPI_COMM_WORLD));
			for (int r = 0; r < size; r++)
				for (size_t i = 0; i < per; i++)
					CHECK(b[(size_t)r * per + i] == ((int64_t)r << 40 | (int64_t)i),
					      "MPI_Allgather of %zu per rank: block %d element %zu", per, r, i);
		}
		MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
		if (g_rank == 0)
			printf("%zu elements (%zu B): Bcast from each root, Reduce (SUM int64, MAX double) to each root, "
			       "Allreduce, Alltoall, Allgather: ok\n",
			       n, n * 8);
	}
	free(a);
	free(b);
	free(d);
	free(e);
	free(bytes);
	if (g_rank == 0)
		printf("mpi_coll: all checks passed on %d ranks\n", size);
	MPI_Finalize();
	return 0;
}
