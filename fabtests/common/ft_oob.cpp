/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* The out-of-band TCP control channel. */
#include "ft_channel.h"

#include "ft_cq.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace ft {

namespace {

sockaddr_in loopback(int port)
{
	sockaddr_in sa{};
	sa.sin_family = AF_INET;
	sa.sin_port = htons(uint16_t(port));
	if (inet_pton(AF_INET, opts.host.c_str(), &sa.sin_addr) != 1)
		FT_FAIL("-c %s: not an IPv4 address (the tests run on 127.0.0.1)",
			opts.host.c_str());
	return sa;
}

uint32_t step_id(const char *step)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (const char *p = step; *p; p++)
		h = (h ^ uint8_t(*p)) * 16777619u;
	return h;
}

} // namespace

int oob_idle_default()
{
	progress_all();
	return 1; /* how often the provider is progressed while nothing arrives */
}

/* Waits until fd is readable, keeping the provider progressing (idle_); bounded. */
void Oob::wait_readable(int fd, const char *what) const
{
	Deadline deadline;
	for (int ms = 0;;) {
		pollfd p{fd, POLLIN, 0};
		int rc = poll(&p, 1, ms);
		if (rc > 0)
			return;
		if (rc < 0 && errno != EINTR)
			FT_FAIL("poll(control channel): %s", strerror(errno));
		ms = idle_();
		if (deadline.expired())
			FT_FAIL("control channel: nothing from the peer after %d s while %s",
				opts.timeout_s, what);
	}
}

Oob::Oob(OobIdle idle, size_t max_blob) : idle_(idle), max_blob_(max_blob)
{
	if (opts.server) {
		int lfd = socket(AF_INET, SOCK_STREAM, 0);
		if (lfd < 0)
			FT_FAIL("socket: %s", strerror(errno));
		int one = 1;
		setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		sockaddr_in sa = loopback(opts.port);
		if (bind(lfd, reinterpret_cast<sockaddr *>(&sa), sizeof sa) || listen(lfd, 1))
			FT_FAIL("bind/listen on %s:%d: %s", opts.host.c_str(), opts.port,
				strerror(errno));
		socklen_t salen = sizeof sa;
		getsockname(lfd, reinterpret_cast<sockaddr *>(&sa), &salen);
		/* The runner reads this line to start the client. */
		printf("PORT %d\n", ntohs(sa.sin_port));
		fflush(stdout);
		wait_readable(lfd, "waiting for the client to connect");
		fd_ = accept(lfd, nullptr, nullptr);
		if (fd_ < 0)
			FT_FAIL("accept: %s", strerror(errno));
		close(lfd);
	} else {
		fd_ = socket(AF_INET, SOCK_STREAM, 0);
		sockaddr_in sa = loopback(opts.port);
		if (fd_ < 0 || connect(fd_, reinterpret_cast<sockaddr *>(&sa), sizeof sa))
			FT_FAIL("connect to %s:%d: %s", opts.host.c_str(), opts.port,
				strerror(errno));
	}
	int one = 1;
	setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

Oob::~Oob()
{
	if (fd_ >= 0)
		close(fd_);
}

void Oob::send(const void *buf, size_t len)
{
	auto *p = static_cast<const uint8_t *>(buf);
	while (len) {
		ssize_t n = ::send(fd_, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			FT_FAIL("control channel send: %s (the peer failed? see its output)",
				strerror(errno));
		p += n;
		len -= size_t(n);
	}
}

void Oob::recv(void *buf, size_t len)
{
	auto *p = static_cast<uint8_t *>(buf);
	while (len) {
		wait_readable(fd_, "waiting for the next step");
		ssize_t n = ::recv(fd_, p, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			FT_FAIL("the peer closed the control channel (it failed? see its output)");
		if (n < 0)
			FT_FAIL("control channel recv: %s", strerror(errno));
		p += n;
		len -= size_t(n);
	}
}

void Oob::await_close()
{
	uint8_t b;
	for (;;) {
		wait_readable(fd_, "waiting for the peer to exit");
		ssize_t n = ::recv(fd_, &b, 1, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return;
		if (n < 0)
			FT_FAIL("control channel recv: %s", strerror(errno));
		FT_FAIL("the peer sent data while it was expected to exit");
	}
}

void Oob::send_blob(const std::vector<uint8_t> &blob)
{
	put(uint32_t(blob.size()));
	send(blob.data(), blob.size());
}

std::vector<uint8_t> Oob::recv_blob()
{
	uint32_t len = get<uint32_t>();
	FT_CHECK(len < max_blob_, "control channel: blob of %u bytes", len);
	std::vector<uint8_t> blob(len);
	recv(blob.data(), len);
	return blob;
}

void Oob::sync(const char *step)
{
	notify(step);
	await(step);
}

void Oob::notify(const char *step)
{
	put(step_id(step));
}

void Oob::await(const char *step)
{
	uint32_t mine = step_id(step);
	uint32_t theirs = get<uint32_t>();
	if (theirs != mine)
		FT_FAIL("control channel: at step '%s' (0x%08x) the peer is at another step "
			"(0x%08x; it failed? see its output)",
			step, mine, theirs);
	debug("step '%s'", step);
}

} // namespace ft
