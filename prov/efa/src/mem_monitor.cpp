/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
#include "mem_monitor.h"

#include "fork.h"
#include "log.h"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace efa {

namespace {

std::mutex g_lock; /* the instance and its users */
MemMonitor *g_monitor = nullptr;
size_t g_users = 0;
uint32_t g_monitor_gen = 0; /* the process generation g_monitor belongs to (fork.h) */
bool g_failed = false; /* tried once and could not start: do not retry per domain */

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

int open_uffd(const char **how)
{
#ifdef __NR_userfaultfd
	int fd = int(syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK));
	*how = "userfaultfd";
	if (fd < 0 && errno == EPERM) {
		/* vm.unprivileged_userfaultfd=0: user-mode faults only, all this needs. */
		fd = int(syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY));
		*how = "userfaultfd (user mode only)";
	}
	return fd;
#else
	errno = ENOSYS;
	return -1;
#endif
}

/* In a fork() child, the parent's monitor: its thread is not in this process, and its
 * watches did not follow the child's mappings. The child forgets it (never stops or
 * frees it) and may start its own. Called with g_lock held. */
void forget_inherited()
{
	if (g_monitor_gen != fork_generation()) {
		g_monitor = nullptr;
		g_users = 0;
		g_failed = false;
		g_monitor_gen = fork_generation();
	}
}

} // namespace

MemMonitor *MemMonitor::acquire()
{
	std::lock_guard g(g_lock);
	forget_inherited();
	if (!g_monitor && !g_failed) {
		auto *m = new MemMonitor();
		if (m->start()) {
			g_monitor = m;
		} else {
			delete m;
			g_failed = true;
		}
	}
	if (g_monitor)
		g_users++;
	return g_monitor;
}

void MemMonitor::release()
{
	MemMonitor *m = nullptr;
	{
		std::lock_guard g(g_lock);
		forget_inherited();
		if (!g_monitor || --g_users)
			return;
		m = g_monitor;
		g_monitor = nullptr;
		if (m->fd_ < 0)
			return; /* stopped by shutdown(); left allocated on purpose */
	}
	/* Stopped with its last cache, so that no thread runs this library's code after it
	 * is unloaded; closing the descriptor ends every watch. */
	m->stop();
	delete m;
}

void MemMonitor::shutdown()
{
	std::lock_guard g(g_lock);
	forget_inherited();
	g_failed = true;
	if (g_monitor && g_monitor->fd_ >= 0)
		g_monitor->stop(); /* the object stays: open caches still point at it */
}

bool MemMonitor::start()
{
	fd_ = open_uffd(&how_);
	if (fd_ < 0) {
		EFA_INFO(Mr, "memory monitor: userfaultfd is not available (%s); registrations are not cached",
			 strerror(errno));
		return false;
	}
	uffdio_api api{};
	api.api = UFFD_API;
	api.features = UFFD_FEATURE_EVENT_UNMAP | UFFD_FEATURE_EVENT_REMOVE | UFFD_FEATURE_EVENT_REMAP;
	if (ioctl(fd_, UFFDIO_API, &api) < 0) {
		EFA_INFO(Mr, "memory monitor: userfaultfd lacks unmap events (%s); registrations are not cached",
			 strerror(errno));
		close(fd_);
		fd_ = -1;
		return false;
	}
	wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (wake_fd_ < 0) {
		close(fd_);
		fd_ = -1;
		return false;
	}
	thread_ = std::thread([this] { run(); });
	EFA_INFO(Mr, "memory monitor: %s", how_);
	return true;
}

void MemMonitor::stop()
{
	stopping_ = true;
	uint64_t one = 1;
	ssize_t n = write(wake_fd_, &one, sizeof one);
	(void)n;
	if (thread_.joinable())
		thread_.join();
	close(fd_);
	close(wake_fd_);
	fd_ = wake_fd_ = -1;
}

void MemMonitor::run()
{
	uffd_msg msgs[32];
	while (!stopping_.load()) {
		pollfd p[2] = {{fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (!(p[0].revents & POLLIN))
			continue;
		/* Marked before the read that releases the unmapping threads, cleared once what
		 * it read is queued (settle()). */
		reading_.store(true, std::memory_order_seq_cst);
		for (;;) {
			const ssize_t n = read(fd_, msgs, sizeof msgs);
			if (n <= 0)
				break;
			for (size_t i = 0; i < size_t(n) / sizeof msgs[0]; i++) {
				const uffd_msg &m = msgs[i];
				switch (m.event) {
				case UFFD_EVENT_UNMAP: post(m.arg.remove.start, m.arg.remove.end); break;
				case UFFD_EVENT_REMOVE: post(m.arg.remove.start, m.arg.remove.end); break;
				case UFFD_EVENT_REMAP:
					post(m.arg.remap.from, m.arg.remap.from + m.arg.remap.len);
					break;
				default: break; /* no page is write-protected: no faults */
				}
			}
		}
		reading_.store(false, std::memory_order_seq_cst);
	}
}

void MemMonitor::post(uintptr_t start, uintptr_t end)
{
	std::lock_guard g(lock_);
	for (Queue *q : subs_) {
		if (!q)
			continue;
		if (q->tail_ - q->head_ == Queue::kCap) {
			q->lost_ = true;
			continue;
		}
		q->ring_[q->tail_ % Queue::kCap] = Range{start, end};
		q->tail_++;
	}
}

MemMonitor::Queue *MemMonitor::subscribe()
{
	auto *q = new Queue();
	std::lock_guard g(lock_);
	for (Queue *&s : subs_) {
		if (!s) {
			s = q;
			return q;
		}
	}
	delete q;
	return nullptr;
}

void MemMonitor::unsubscribe(Queue *q)
{
	if (!q)
		return;
	{
		std::lock_guard g(lock_);
		for (Queue *&s : subs_)
			if (s == q)
				s = nullptr;
	}
	delete q;
}

bool MemMonitor::watch(uintptr_t start, uintptr_t end)
{
	if (fd_ < 0)
		return false;
	uffdio_register r{};
	r.range.start = start;
	r.range.len = end - start;
	r.mode = UFFDIO_REGISTER_MODE_WP;
	if (ioctl(fd_, UFFDIO_REGISTER, &r) == 0)
		return true;
	EFA_DBG(Mr, "memory monitor: cannot watch [%#lx, %#lx): %s", (unsigned long)start, (unsigned long)end,
		strerror(errno));
	return false;
}

void MemMonitor::unwatch(uintptr_t start, uintptr_t end)
{
	if (fd_ < 0)
		return;
	uffdio_range r{start, end - start};
	ioctl(fd_, UFFDIO_UNREGISTER, &r); /* the range may be gone already */
}

} // namespace efa
