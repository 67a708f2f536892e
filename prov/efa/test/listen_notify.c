/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * LD_PRELOAD shim for tests that drive third-party servers: after the program's first
 * successful listen(), writes one line to the file descriptor named by
 * LISTEN_NOTIFY_FD, so a test starts the client when the server listens, not after a
 * sleep.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

int listen(int fd, int backlog)
{
	static int (*real)(int, int);
	static int told;
	if (!real)
		real = (int (*)(int, int))dlsym(RTLD_NEXT, "listen");
	int ret = real(fd, backlog);
	const char *n = getenv("LISTEN_NOTIFY_FD");
	if (ret == 0 && n && !told) {
		told = 1;
		ssize_t w = write(atoi(n), "listening\n", 10);
		(void)w;
		close(atoi(n));
	}
	return ret;
}
