/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * mpi_bench: MPI ping-pong latency and streaming bandwidth between ranks 0 and 1 (a
 * benchmark, not a test: contrib/mpi/run_mpi_bench.sh runs it over several transports
 * and prints the ratios).
 *
 *   mpi_bench [-max BYTES] [-iters N]
 *
 * Latency: half the round-trip time of MPI_Send/MPI_Recv, median of 5 batches after an
 * untimed warm-up of at least 2,000 round trips below 64 KiB (as OSU's skip count; the
 * efa fabric with same-host peers through shm runs its first ~1,200 round trips after
 * MPI_Init about twice as slow, so without it the first size, 1 byte, read 1.5-2x the
 * next ones: performance.md).
 * Bandwidth: rank 0 posts 32 MPI_Isend of the size back to back, rank 1 32 MPI_Irecv;
 * a zero-byte reply ends each window; MB/s = 10^6 bytes per second, best of 3.
 * Output: one line per size, "size lat_us bw_MBps", after a "# size lat_us bw_MBps"
 * header; rank 1's data is checked once per size.
 */
#include "mpi_check.h"

static int cmp_double(const void *a, const void *b)
{
	const double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
	size_t max = 4u << 20;
	long iters = 2000;
	for (int i = 1; i + 1 < argc; i++) {
		if (!strcmp(argv[i], "-max"))
			max = (size_t)strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "-iters"))
			iters = strtol(argv[++i], NULL, 0);
	}
	enum { WINDOW = 32 };
	uint8_t *buf = malloc(max * WINDOW);
	CHECK(buf, "malloc");
	MPI_Request req[WINDOW];
	const int peer = 1 - g_rank;
	if (g_rank == 0)
		printf("# size lat_us bw_MBps\n");
	for (size_t len = 1; len <= max; len *= 4) {
		if (g_rank > 1)
			continue;
		/* the data once, checked */
		if (g_rank == 0) {
			fill(buf, len, (uint32_t)len);
			MPI_OK(MPI_Send(buf, (int)len, MPI_BYTE, 1, 1, MPI_COMM_WORLD));
		} else {
			memset(buf, 0, len);
			MPI_OK(MPI_Recv(buf, (int)len, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
			CHECK_DATA(buf, len, (uint32_t)len, "benchmark message");
		}
		long n = len >= (1u << 20) ? iters / 20 : len >= 65536 ? iters / 4 : iters;
		if (n < 10)
			n = 10;
		double lat[5];
		const long batch = n / 5 + 1;
		const long warmup = len < 65536 && batch < 2000 ? 2000 : batch;
		for (int b = -1; b < 5; b++) { /* b = -1: the warm-up, not recorded */
			MPI_Barrier(MPI_COMM_WORLD);
			const double t0 = MPI_Wtime();
			for (long i = 0; i < (b < 0 ? warmup : batch); i++) {
				if (g_rank == 0) {
					MPI_OK(MPI_Send(buf, (int)len, MPI_BYTE, peer, 2, MPI_COMM_WORLD));
					MPI_OK(MPI_Recv(buf, (int)len, MPI_BYTE, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
				} else {
					MPI_OK(MPI_Recv(buf, (int)len, MPI_BYTE, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
					MPI_OK(MPI_Send(buf, (int)len, MPI_BYTE, peer, 2, MPI_COMM_WORLD));
				}
			}
			if (b >= 0)
				lat[b] = (MPI_Wtime() - t0) / (double)batch / 2 * 1e6;
		}
		qsort(lat, 5, sizeof lat[0], cmp_double);
		double best = 0;
		const long windows = len >= (1u << 20) ? 4 : len >= 65536 ? 20 : 100;
		for (int b = 0; b < 3; b++) {
			MPI_Barrier(MPI_COMM_WORLD);
			const double t0 = MPI_Wtime();
			for (long w = 0; w < windows; w++) {
				for (int k = 0; k < WINDOW; k++) {
					if (g_rank == 0)
						MPI_OK(MPI_Isend(buf + (size_t)k * len, (int)len, MPI_BYTE, peer, 3, MPI_COMM_WORLD,
								 &req[k]));
					else
						MPI_OK(MPI_Irecv(buf + (size_t)k * len, (int)len, MPI_BYTE, peer, 3, MPI_COMM_WORLD,
								 &req[k]));
				}
				MPI_OK(MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE));
				if (g_rank == 0)
					MPI_OK(MPI_Recv(NULL, 0, MPI_BYTE, peer, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
				else
					MPI_OK(MPI_Send(NULL, 0, MPI_BYTE, peer, 4, MPI_COMM_WORLD));
			}
			const double secs = MPI_Wtime() - t0;
			const double mbps = (double)len * WINDOW * (double)windows / secs / 1e6;
			best = mbps > best ? mbps : best;
		}
		if (g_rank == 0) {
			printf("%zu %.2f %.1f\n", len, lat[2], best);
			fflush(stdout);
		}
	}
	free(buf);
	MPI_Finalize();
	return 0;
}
