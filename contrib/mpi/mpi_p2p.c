/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * mpi_p2p: MPI point-to-point semantics, every result checked. Run with 2 or more ranks
 * (pml cm + mtl ofi on the efa provider: contrib/mpi/run_mpi_tests.sh).
 *
 *  1. blocking MPI_Send/MPI_Recv from 0 B to 64 MiB (each size both ways), status count;
 *  2. 1000 non-blocking messages in flight per direction (MPI_Isend/MPI_Irecv, Waitall),
 *     with receives posted before and after the sends arrive;
 *  3. MPI_ANY_SOURCE/MPI_ANY_TAG: every other rank sends to rank 0, which receives
 *     each exactly once and checks MPI_SOURCE, MPI_TAG and the count;
 *  4. non-overtaking: 200 messages of one tag, 0 B .. 300 KiB, arrive in send order;
 *  5. MPI_Ssend and MPI_Issend: the synchronous send does not complete before the
 *     receive is posted (MPI_Test stays false until then), and completes after it;
 *  6. MPI_Probe, MPI_Iprobe (a miss and a hit), MPI_Improbe + MPI_Mrecv,
 *     MPI_Mprobe + MPI_Imrecv;
 *  7. MPI_Cancel of a receive: MPI_Test_cancelled is true and it takes no message;
 *  8. truncation: a receive smaller than the message fails with MPI_ERR_TRUNCATE
 *     (MPI_ERRORS_RETURN), and the ranks go on communicating.
 */
#include "mpi_check.h"

enum { TAG_SIZE = 100, TAG_NB = 1000, TAG_ANY = 3000, TAG_ORDER = 4000, TAG_SYNC = 5000, TAG_PROBE = 6000,
       TAG_CANCEL = 7000, TAG_TRUNC = 8000 };

static int size;
static MPI_Comm pair = MPI_COMM_NULL; /* ranks 0 and 1 */

static void sizes(void)
{
	const size_t lens[] = {0, 1, 7, 64, 1023, 4096, 8191, 8192, 8193, 16384, 65535, 65536, 65537,
			       262144, 1u << 20, (4u << 20) + 3, 64u << 20};
	const int n = (int)(sizeof lens / sizeof lens[0]);
	uint8_t *buf = malloc((64u << 20) + 64);
	CHECK(buf, "malloc");
	for (int i = 0; i < n; i++) {
		for (int dir = 0; dir < 2; dir++) {
			const int sender = dir, receiver = 1 - dir;
			const uint32_t seed = (uint32_t)(lens[i] * 31 + (size_t)dir);
			if (g_rank == sender) {
				fill(buf, lens[i], seed);
				MPI_OK(MPI_Send(buf, (int)lens[i], MPI_BYTE, receiver, TAG_SIZE + i, MPI_COMM_WORLD));
			} else if (g_rank == receiver) {
				MPI_Status st;
				int count = -1;
				memset(buf, 0xa5, lens[i] + 64);
				MPI_OK(MPI_Recv(buf, (int)lens[i] + 64, MPI_BYTE, sender, TAG_SIZE + i, MPI_COMM_WORLD,
						&st));
				MPI_Get_count(&st, MPI_BYTE, &count);
				CHECK(count == (int)lens[i], "size %zu: count %d", lens[i], count);
				CHECK(st.MPI_SOURCE == sender && st.MPI_TAG == TAG_SIZE + i, "size %zu: source %d tag %d",
				      lens[i], st.MPI_SOURCE, st.MPI_TAG);
				CHECK_DATA(buf, lens[i], seed, "blocking receive");
				for (int k = 0; k < 64; k++)
					CHECK(buf[lens[i] + (size_t)k] == 0xa5, "size %zu: written past the message", lens[i]);
			}
		}
	}
	free(buf);
	if (g_rank == 0)
		printf("blocking send/recv 0 B .. 64 MiB both ways: ok\n");
}

static void nonblocking(void)
{
	enum { N = 1000, LEN = 2000 };
	if (g_rank > 1)
		return;
	const int peer = 1 - g_rank;
	uint8_t *sbuf = malloc((size_t)N * LEN), *rbuf = malloc((size_t)N * LEN);
	MPI_Request *req = malloc(sizeof(MPI_Request) * 2 * N);
	MPI_Status *st = malloc(sizeof(MPI_Status) * 2 * N);
	CHECK(sbuf && rbuf && req && st, "malloc");
	for (int round = 0; round < 2; round++) {
		/* round 0: receives posted first; round 1: sends first (unexpected messages) */
		memset(rbuf, 0, (size_t)N * LEN);
		int k = 0;
		if (round == 0)
			for (int i = 0; i < N; i++)
				MPI_OK(MPI_Irecv(rbuf + (size_t)i * LEN, LEN, MPI_BYTE, peer, TAG_NB + i % 7, MPI_COMM_WORLD,
						 &req[k++]));
		MPI_Barrier(pair);
		for (int i = 0; i < N; i++) {
			const int len = (i * 37) % LEN;
			fill(sbuf + (size_t)i * LEN, (size_t)len, (uint32_t)(g_rank * 100000 + i + round * 7777));
			MPI_OK(MPI_Isend(sbuf + (size_t)i * LEN, len, MPI_BYTE, peer, TAG_NB + i % 7, MPI_COMM_WORLD,
					 &req[k++]));
		}
		if (round == 1) {
			MPI_Barrier(pair);
			for (int i = 0; i < N; i++)
				MPI_OK(MPI_Irecv(rbuf + (size_t)i * LEN, LEN, MPI_BYTE, peer, TAG_NB + i % 7, MPI_COMM_WORLD,
						 &req[k++]));
		}
		MPI_OK(MPI_Waitall(k, req, st));
		for (int i = 0; i < N; i++) {
			/* receives were posted in message order per tag, so message i lands in slot i */
			const int idx = round == 0 ? i : N + i;
			int count = -1;
			MPI_Get_count(&st[idx], MPI_BYTE, &count);
			CHECK(count == (i * 37) % LEN, "round %d message %d: count %d", round, i, count);
			CHECK(st[idx].MPI_TAG == TAG_NB + i % 7 && st[idx].MPI_SOURCE == peer, "round %d message %d: tag %d",
			      round, i, st[idx].MPI_TAG);
			CHECK_DATA(rbuf + (size_t)i * LEN, (size_t)count, (uint32_t)(peer * 100000 + i + round * 7777),
				   "non-blocking receive");
		}
	}
	free(sbuf);
	free(rbuf);
	free(req);
	free(st);
	if (g_rank == 0)
		printf("%d non-blocking messages each way, receives posted before and after: ok\n", 2 * N);
}

static void any_source(void)
{
	enum { PER = 50 };
	uint8_t buf[4096];
	if (g_rank != 0) {
		for (int i = 0; i < PER; i++) {
			const int len = 1 + (g_rank * 131 + i * 17) % 4000;
			fill(buf, (size_t)len, (uint32_t)(g_rank * 1000 + i));
			MPI_OK(MPI_Send(buf, len, MPI_BYTE, 0, TAG_ANY + i, MPI_COMM_WORLD));
		}
		return;
	}
	int *next = calloc((size_t)size, sizeof(int));
	for (int k = 0; k < PER * (size - 1); k++) {
		MPI_Status st;
		int count = -1;
		MPI_OK(MPI_Recv(buf, sizeof buf, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
		const int src = st.MPI_SOURCE;
		CHECK(src > 0 && src < size, "MPI_ANY_SOURCE: source %d", src);
		const int i = next[src]++;
		CHECK(st.MPI_TAG == TAG_ANY + i, "from %d: tag %d, expected %d (non-overtaking)", src, st.MPI_TAG,
		      TAG_ANY + i);
		MPI_Get_count(&st, MPI_BYTE, &count);
		CHECK(count == 1 + (src * 131 + i * 17) % 4000, "from %d message %d: count %d", src, i, count);
		CHECK_DATA(buf, (size_t)count, (uint32_t)(src * 1000 + i), "MPI_ANY_SOURCE receive");
	}
	for (int r = 1; r < size; r++)
		CHECK(next[r] == PER, "from %d: %d messages", r, next[r]);
	free(next);
	printf("MPI_ANY_SOURCE/MPI_ANY_TAG from %d ranks, %d messages each: ok\n", size - 1, PER);
}

static void order(void)
{
	enum { N = 200 };
	if (g_rank > 1)
		return;
	const size_t max = 300u << 10;
	uint8_t *buf = malloc(max);
	if (g_rank == 1) {
		for (int i = 0; i < N; i++) {
			const size_t len = (size_t)(i * 7919) % max;
			fill(buf, len, (uint32_t)i + 50000);
			MPI_OK(MPI_Send(buf, (int)len, MPI_BYTE, 0, TAG_ORDER, MPI_COMM_WORLD));
		}
	} else {
		for (int i = 0; i < N; i++) {
			MPI_Status st;
			int count = -1;
			MPI_OK(MPI_Recv(buf, (int)max, MPI_BYTE, 1, TAG_ORDER, MPI_COMM_WORLD, &st));
			MPI_Get_count(&st, MPI_BYTE, &count);
			CHECK(count == (int)((size_t)(i * 7919) % max), "message %d of one tag: count %d (overtaken?)", i,
			      count);
			CHECK_DATA(buf, (size_t)count, (uint32_t)i + 50000, "ordered receive");
		}
		printf("%d messages of one tag (0 B .. 300 KiB) in send order: ok\n", N);
	}
	free(buf);
}

static void synchronous(void)
{
	if (g_rank > 1)
		return;
	char buf[100000];
	const int lens[] = {0, 10, 100000};
	for (int i = 0; i < 3; i++) {
		if (g_rank == 0) {
			MPI_Request r;
			int done = 1;
			fill(buf, (size_t)lens[i], (uint32_t)(i + 900));
			MPI_OK(MPI_Issend(buf, lens[i], MPI_BYTE, 1, TAG_SYNC + i, MPI_COMM_WORLD, &r));
			for (int k = 0; k < 100; k++)
				MPI_OK(MPI_Test(&r, &done, MPI_STATUS_IGNORE));
			CHECK(!done, "MPI_Issend of %d B completed before the receive was posted", lens[i]);
			/* only now may rank 1 post its receive */
			MPI_OK(MPI_Send(NULL, 0, MPI_BYTE, 1, TAG_SYNC + 10, MPI_COMM_WORLD));
			MPI_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
			MPI_OK(MPI_Ssend(buf, lens[i], MPI_BYTE, 1, TAG_SYNC + 20 + i, MPI_COMM_WORLD));
		} else {
			MPI_Status st;
			int count = -1;
			MPI_OK(MPI_Recv(NULL, 0, MPI_BYTE, 0, TAG_SYNC + 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
			memset(buf, 0, sizeof buf);
			MPI_OK(MPI_Recv(buf, sizeof buf, MPI_BYTE, 0, TAG_SYNC + i, MPI_COMM_WORLD, &st));
			MPI_Get_count(&st, MPI_BYTE, &count);
			CHECK(count == lens[i], "Issend: count %d", count);
			CHECK_DATA(buf, (size_t)lens[i], (uint32_t)(i + 900), "MPI_Issend");
			memset(buf, 0, sizeof buf);
			MPI_OK(MPI_Recv(buf, sizeof buf, MPI_BYTE, 0, TAG_SYNC + 20 + i, MPI_COMM_WORLD, &st));
			CHECK_DATA(buf, (size_t)lens[i], (uint32_t)(i + 900), "MPI_Ssend");
		}
	}
	if (g_rank == 0)
		printf("MPI_Ssend, MPI_Issend (0 B, 10 B, 100000 B; incomplete until the receive is posted): ok\n");
}

static void probes(void)
{
	if (g_rank > 1)
		return;
	uint8_t buf[70000];
	const int lens[] = {1000, 0, 65000, 70000};
	if (g_rank == 1) {
		for (int i = 0; i < 4; i++) {
			fill(buf, (size_t)lens[i], (uint32_t)(i + 4242));
			MPI_OK(MPI_Send(buf, lens[i], MPI_BYTE, 0, TAG_PROBE + i, MPI_COMM_WORLD));
		}
		MPI_Barrier(pair);
		return;
	}
	MPI_Status st;
	int flag = 1, count = -1;
	/* a miss: no message has this tag */
	MPI_OK(MPI_Iprobe(1, TAG_PROBE + 99, MPI_COMM_WORLD, &flag, &st));
	CHECK(!flag, "MPI_Iprobe of a tag never sent found a message");
	/* MPI_Probe, then the receive */
	MPI_OK(MPI_Probe(MPI_ANY_SOURCE, TAG_PROBE, MPI_COMM_WORLD, &st));
	MPI_Get_count(&st, MPI_BYTE, &count);
	CHECK(count == lens[0] && st.MPI_SOURCE == 1, "MPI_Probe: count %d source %d", count, st.MPI_SOURCE);
	MPI_OK(MPI_Recv(buf, count, MPI_BYTE, 1, TAG_PROBE, MPI_COMM_WORLD, &st));
	CHECK_DATA(buf, (size_t)lens[0], 4242u, "receive after MPI_Probe");
	/* MPI_Iprobe until it hits */
	do
		MPI_OK(MPI_Iprobe(1, TAG_PROBE + 1, MPI_COMM_WORLD, &flag, &st));
	while (!flag);
	MPI_Get_count(&st, MPI_BYTE, &count);
	CHECK(count == 0 && st.MPI_TAG == TAG_PROBE + 1, "MPI_Iprobe hit: count %d tag %d", count, st.MPI_TAG);
	MPI_OK(MPI_Recv(buf, 0, MPI_BYTE, 1, TAG_PROBE + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
	/* MPI_Improbe + MPI_Mrecv */
	MPI_Message msg;
	do
		MPI_OK(MPI_Improbe(1, TAG_PROBE + 2, MPI_COMM_WORLD, &flag, &msg, &st));
	while (!flag);
	MPI_Get_count(&st, MPI_BYTE, &count);
	CHECK(count == lens[2], "MPI_Improbe: count %d", count);
	/* the matched message is no longer visible to probes */
	MPI_OK(MPI_Iprobe(1, TAG_PROBE + 2, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
	CHECK(!flag, "a message matched by MPI_Improbe is still visible to MPI_Iprobe");
	memset(buf, 0, sizeof buf);
	MPI_OK(MPI_Mrecv(buf, count, MPI_BYTE, &msg, &st));
	CHECK_DATA(buf, (size_t)lens[2], 4244u, "MPI_Mrecv");
	/* MPI_Mprobe + MPI_Imrecv */
	MPI_Request r;
	MPI_OK(MPI_Mprobe(1, TAG_PROBE + 3, MPI_COMM_WORLD, &msg, &st));
	MPI_Get_count(&st, MPI_BYTE, &count);
	CHECK(count == lens[3], "MPI_Mprobe: count %d", count);
	memset(buf, 0, sizeof buf);
	MPI_OK(MPI_Imrecv(buf, count, MPI_BYTE, &msg, &r));
	MPI_OK(MPI_Wait(&r, &st));
	CHECK_DATA(buf, (size_t)lens[3], 4245u, "MPI_Imrecv");
	MPI_Barrier(pair);
	printf("MPI_Probe, MPI_Iprobe (miss, hit), MPI_Improbe + MPI_Mrecv, MPI_Mprobe + MPI_Imrecv: ok\n");
}

static void cancel(void)
{
	if (g_rank > 1)
		return;
	int buf[4] = {0, 0, 0, 0}, flag = 0;
	if (g_rank == 0) {
		MPI_Request r;
		MPI_Status st;
		MPI_OK(MPI_Irecv(buf, 4, MPI_INT, 1, TAG_CANCEL, MPI_COMM_WORLD, &r));
		MPI_OK(MPI_Cancel(&r));
		MPI_OK(MPI_Wait(&r, &st));
		MPI_OK(MPI_Test_cancelled(&st, &flag));
		CHECK(flag, "a cancelled receive was not cancelled");
		MPI_Barrier(pair);
		/* the message sent after the cancel goes to the next receive */
		MPI_OK(MPI_Recv(buf, 4, MPI_INT, 1, TAG_CANCEL, MPI_COMM_WORLD, &st));
		CHECK(buf[0] == 11 && buf[3] == 44, "after the cancel: %d .. %d", buf[0], buf[3]);
		printf("MPI_Cancel of a receive: cancelled, takes nothing: ok\n");
	} else {
		int msg[4] = {11, 22, 33, 44};
		MPI_Barrier(pair);
		MPI_OK(MPI_Send(msg, 4, MPI_INT, 0, TAG_CANCEL, MPI_COMM_WORLD));
	}
}

static void truncation(void)
{
	if (g_rank > 1)
		return;
	uint8_t buf[300000];
	const int lens[] = {1000, 300000};
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	for (int i = 0; i < 2; i++) {
		if (g_rank == 1) {
			fill(buf, (size_t)lens[i], (uint32_t)i + 77);
			MPI_OK(MPI_Send(buf, lens[i], MPI_BYTE, 0, TAG_TRUNC + i, MPI_COMM_WORLD));
		} else {
			MPI_Status st;
			int cls = 0;
			const int rc = MPI_Recv(buf, 100, MPI_BYTE, 1, TAG_TRUNC + i, MPI_COMM_WORLD, &st);
			MPI_Error_class(rc, &cls);
			CHECK(cls == MPI_ERR_TRUNCATE, "a %d B message into 100 B: error class %d, expected MPI_ERR_TRUNCATE",
			      lens[i], cls);
		}
	}
	/* still talking */
	if (g_rank == 1) {
		fill(buf, 5000, 999);
		MPI_OK(MPI_Send(buf, 5000, MPI_BYTE, 0, TAG_TRUNC + 9, MPI_COMM_WORLD));
	} else {
		MPI_OK(MPI_Recv(buf, 5000, MPI_BYTE, 1, TAG_TRUNC + 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
		CHECK_DATA(buf, 5000, 999, "a receive after truncation");
		printf("truncation (1000 B and 300000 B into 100 B): MPI_ERR_TRUNCATE, then on: ok\n");
	}
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	setvbuf(stdout, NULL, _IOLBF, 0); /* each check's line as it passes (mpirun forwards output) */
	MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	CHECK(size >= 2, "run with at least 2 ranks");
	MPI_Comm_split(MPI_COMM_WORLD, g_rank < 2 ? 0 : MPI_UNDEFINED, g_rank, &pair);
	sizes();
	MPI_Barrier(MPI_COMM_WORLD);
	nonblocking();
	MPI_Barrier(MPI_COMM_WORLD);
	any_source();
	MPI_Barrier(MPI_COMM_WORLD);
	order();
	MPI_Barrier(MPI_COMM_WORLD);
	synchronous();
	MPI_Barrier(MPI_COMM_WORLD);
	probes();
	cancel();
	MPI_Barrier(MPI_COMM_WORLD);
	truncation();
	MPI_Barrier(MPI_COMM_WORLD);
	if (pair != MPI_COMM_NULL)
		MPI_Comm_free(&pair);
	if (g_rank == 0)
		printf("mpi_p2p: all checks passed on %d ranks\n", size);
	MPI_Finalize();
	return 0;
}
