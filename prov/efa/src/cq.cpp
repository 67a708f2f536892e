/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
#include "cq.h"

#include "efa_errno.h"
#include "log.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

namespace efa {

namespace {

constexpr uint32_t kDefaultDepth = 12288; /* as upstream: 4k transmit + 8k receive */

size_t entry_size_of(fi_cq_format f)
{
	switch (f) {
	case FI_CQ_FORMAT_CONTEXT: return sizeof(fi_cq_entry);
	case FI_CQ_FORMAT_MSG: return sizeof(fi_cq_msg_entry);
	case FI_CQ_FORMAT_DATA: return sizeof(fi_cq_data_entry);
	case FI_CQ_FORMAT_TAGGED: return sizeof(fi_cq_tagged_entry);
	default: return 0;
	}
}

/* Consumes a pending completion-channel event, if any (the channel fd is non-blocking). */
void consume_event(Cq *cq)
{
	if (cq->armed && cq->channel && cq->vcq.get_event() == 0)
		cq->armed = false;
}

/* Inline: fi_cq_read's whole path is this (an empty read is most of them). */
[[gnu::always_inline]] inline ssize_t cq_read_locked(Cq *cq, void *buf, size_t count, fi_addr_t *src)
{
	consume_event(cq);
	const size_t have = cq->staged_count();
	if (have < count)
		cq->progress(count - have);
	std::lock_guard g(cq->stage_lock);
	const size_t n = std::min(count, cq->staged.size());
	auto *out = static_cast<uint8_t *>(buf);
	const size_t esz = cq->entry_size;
	for (size_t i = 0; i < n; i++) {
		const Cq::Entry &e = cq->staged.front();
		std::memcpy(out + i * esz, &e.e, esz); /* every format is a prefix of the tagged entry */
		if (src)
			src[i] = e.src;
		cq->staged.pop_front();
	}
	if (n)
		return ssize_t(n);
	return cq->errors.empty() ? -FI_EAGAIN : -FI_EAVAIL;
}

ssize_t cq_readfrom(fid_cq *f, void *buf, size_t count, fi_addr_t *src)
{
	Cq *cq = fid_to<Cq>(&f->fid);
	if (!cq)
		return -FI_EINVAL;
	if (count && !buf) {
		EFA_WARN_ONCE(Cq, "fi_cq_read: a NULL buffer for %zu entries; pass an array of count entries of the CQ's format",
			      count);
		return -FI_EINVAL;
	}
	std::lock_guard g(cq->lock);
	return cq_read_locked(cq, buf, count, src);
}

ssize_t cq_read(fid_cq *f, void *buf, size_t count) { return cq_readfrom(f, buf, count, nullptr); }

ssize_t cq_readerr(fid_cq *f, fi_cq_err_entry *buf, uint64_t flags)
{
	Cq *cq = fid_to<Cq>(&f->fid);
	if (!cq)
		return -FI_EINVAL;
	if (!buf || (flags & ~uint64_t(FI_PEEK))) {
		EFA_WARN_ONCE(Cq, "fi_cq_readerr: pass a struct fi_cq_err_entry and flags 0 or FI_PEEK (got %s, %#lx)",
			      buf ? "a buffer" : "NULL", (unsigned long)flags);
		return -FI_EINVAL;
	}
	std::lock_guard g(cq->lock);
	std::lock_guard gs(cq->stage_lock);
	if (cq->errors.empty())
		return -FI_EAGAIN;
	Cq::Error &err = cq->errors.front();
	void *user_data = buf->err_data;
	const size_t user_size = buf->err_data_size;
	const uint32_t api = cq->dom->fabric->fab.api_version;
	*buf = err.e;
	if (FI_VERSION_GE(api, FI_VERSION(1, 5)) && user_data && user_size) {
		const size_t n = std::min(user_size, err.text.size() + 1);
		std::memcpy(user_data, err.text.c_str(), n);
		static_cast<char *>(user_data)[n - 1] = 0;
		buf->err_data = user_data;
		buf->err_data_size = n;
	} else {
		cq->last_err = err.text;
		buf->err_data = const_cast<char *>(cq->last_err.c_str());
		buf->err_data_size = cq->last_err.size() + 1;
	}
	if (!(flags & FI_PEEK))
		cq->errors.pop_front();
	return 1;
}

ssize_t cq_sreadfrom(fid_cq *f, void *buf, size_t count, fi_addr_t *src, const void *cond, int timeout)
{
	Cq *cq = fid_to<Cq>(&f->fid);
	if (!cq || (count && !buf))
		return -FI_EINVAL;
	(void)cond; /* FI_CQ_COND_NONE only: any completion ends the wait */
	if (!cq->channel)
		return -FI_EINVAL; /* no wait object */
	using clock = std::chrono::steady_clock;
	const auto deadline = clock::now() + std::chrono::milliseconds(timeout < 0 ? 0 : timeout);
	for (;;) {
		{
			std::lock_guard g(cq->lock);
			ssize_t ret = cq_read_locked(cq, buf, count, src);
			if (ret != -FI_EAGAIN)
				return ret;
			/* Arm, then look once more: a completion between the read and the arming
			 * would otherwise raise no event. */
			if (!cq->armed) {
				if (int r = cq->vcq.arm())
					return r;
				cq->armed = true;
			}
			ret = cq_read_locked(cq, buf, count, src);
			if (ret != -FI_EAGAIN)
				return ret;
		}
		int wait_ms = -1;
		if (timeout >= 0) {
			auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
			if (left <= 0)
				return -FI_EAGAIN;
			wait_ms = int(left);
		}
		/* shm raises no event: look again every millisecond. */
		if (cq->polled.load(std::memory_order_relaxed) > 0 && (wait_ms < 0 || wait_ms > 1))
			wait_ms = 1;
		pollfd p[2] = {{cq->channel.fd(), POLLIN, 0}, {cq->signal_fd, POLLIN, 0}};
		int r = poll(p, 2, wait_ms);
		if (r < 0 && errno != EINTR)
			return -errno;
		if (p[1].revents & POLLIN) {
			uint64_t v;
			ssize_t n = read(cq->signal_fd, &v, sizeof v);
			(void)n;
			return -FI_EAGAIN; /* fi_cq_signal */
		}
	}
}

ssize_t cq_sread(fid_cq *f, void *buf, size_t count, const void *cond, int timeout)
{
	return cq_sreadfrom(f, buf, count, nullptr, cond, timeout);
}

int cq_signal(fid_cq *f)
{
	Cq *cq = fid_to<Cq>(&f->fid);
	if (!cq)
		return -FI_EINVAL;
	if (cq->signal_fd < 0)
		return -FI_ENOSYS;
	uint64_t one = 1;
	ssize_t r = write(cq->signal_fd, &one, sizeof one);
	(void)r;
	return 0;
}

const char *cq_strerror(fid_cq *, int prov_errno, const void *err_data, char *buf, size_t len)
{
	const char *msg = err_data ? static_cast<const char *>(err_data) : efa_status_msg(uint32_t(prov_errno));
	if (buf && len) {
		strncpy(buf, msg, len - 1);
		buf[len - 1] = 0;
		return buf;
	}
	return msg;
}

int cq_close(fid_t f)
{
	Cq *cq = fid_to<Cq>(f);
	if (!cq)
		return -FI_EINVAL;
	if (cq->hdr.children.load())
		return -FI_EBUSY;
	if (const Cq::DevicePolls &d = cq->device_polls; d.n)
		EFA_INFO(Cq, "CQ with same-host endpoints: %u device polls, an empty one took %lu ns (averaged); a quiet "
			     "device was polled at most every %lu ns while the shm path was busy",
			 d.n, (unsigned long)d.empty_ns,
			 (unsigned long)(d.empty_ns < Cq::kCostlyPollNs
						 ? 0
						 : std::max(Cq::kQuietPollNs, d.empty_ns * Cq::kQuietPolls)));
	cq->vcq = verbs::Cq();
	cq->channel.reset();
	if (cq->signal_fd >= 0)
		close(cq->signal_fd);
	if (cq->epfd >= 0)
		close(cq->epfd);
	cq->signal_fd = cq->epfd = -1;
	cq->staged.clear();
	cq->errors.clear();
	cq->dom->hdr.children--;
	retire(cq);
	return 0;
}

int cq_control(fid_t f, int command, void *arg)
{
	Cq *cq = fid_to<Cq>(f);
	if (!cq)
		return -FI_EINVAL;
	switch (command) {
	case FI_GETWAIT:
		if (cq->epfd < 0 || !arg)
			return -FI_ENODATA;
		{
			/* The fd signals only when armed: arm now, as fi_trywait would. */
			std::lock_guard g(cq->lock);
			if (!cq->armed && cq->vcq.arm() == 0)
				cq->armed = true;
		}
		*static_cast<int *>(arg) = cq->epfd;
		return 0;
	case FI_GETWAITOBJ:
		if (!arg)
			return -FI_EINVAL;
		*static_cast<fi_wait_obj *>(arg) = cq->epfd >= 0 ? FI_WAIT_FD : FI_WAIT_NONE;
		return 0;
	default:
		return -FI_ENOSYS;
	}
}

fi_ops g_cq_fi_ops = {
	.size = sizeof(fi_ops),
	.close = cq_close,
	.bind = no_bind,
	.control = cq_control,
	.ops_open = no_ops_open,
	.tostr = nullptr,
	.ops_set = nullptr,
};

fi_ops_cq g_cq_ops = {
	.size = sizeof(fi_ops_cq),
	.read = cq_read,
	.readfrom = cq_readfrom,
	.readerr = cq_readerr,
	.sread = cq_sread,
	.sreadfrom = cq_sreadfrom,
	.signal = cq_signal,
	.strerror = cq_strerror,
};

} // namespace

int Cq::progress_mixed(size_t max)
{
	/* Same-host endpoints here: a quiet device is not polled on every pass when its
	 * polls are costly and the other path is busy (cq.h, DevicePolls). */
	DevicePolls &d = device_polls;
	const uint64_t now = d.clock.now_ns();
	int n = 0;
	if (d.quiet < kQuiet || d.empty_ns < kCostlyPollNs || now - d.busy_ns >= kBusyNs ||
	    now - d.last_ns >= std::max(kQuietPollNs, d.empty_ns * kQuietPolls)) {
		const bool timed = (++d.n & 63) == 0;
		n = poll_device(max);
		d.last_ns = timed ? d.clock.now_ns() : now;
		if (timed && n == 0)
			d.empty_ns = d.empty_ns ? (d.empty_ns * 7 + (d.last_ns - now)) / 8 : d.last_ns - now;
		d.quiet = n > 0 ? 0 : std::min(d.quiet + 1, kQuiet);
	}
	const uint64_t before = pushed.load(std::memory_order_relaxed);
	for (const User &u : users)
		u.user->on_progress(*this);
	if (n == 0 && pushed.load(std::memory_order_relaxed) != before)
		d.busy_ns = now;
	return n;
}

int Cq::poll_device(size_t max)
{
	int n = vcq.poll(int(std::min<size_t>(max ? max : 1, 64)), [&](const verbs::Wc &wc) {
		for (const User &u : users) {
			if (u.qpn == wc.qp_num) {
				u.user->on_wc(wc, *this);
				return;
			}
		}
		/* The endpoint was closed: its late completions are dropped. */
	});
	return n;
}

void Cq::attach(CqUser *u)
{
	std::lock_guard g(lock);
	users.push_back(User{u, u->qpn()});
}

void Cq::detach(CqUser *u)
{
	std::lock_guard g(lock);
	std::erase_if(users, [u](const User &x) { return x.user == u; });
}

int Cq::trywait()
{
	std::lock_guard g(lock);
	consume_event(this);
	if (has_anything() || progress(64) > 0 || has_anything())
		return -FI_EAGAIN;
	if (!channel)
		return -FI_EINVAL;
	/* A same-host (shm) path raises no event: blocking on the fd could miss it. */
	if (polled.load(std::memory_order_relaxed) > 0)
		return -FI_EAGAIN;
	if (!armed) {
		if (int r = vcq.arm())
			return r;
		armed = true;
	}
	/* Completions that arrived before the arming raise no event. */
	if (progress(64) > 0 || has_anything())
		return -FI_EAGAIN;
	return 0;
}

void Cq::poke()
{
	std::lock_guard g(lock);
	consume_event(this);
	progress(64);
}

int cq_open(fid_domain *df, fi_cq_attr *attr, fid_cq **out, void *context)
{
	Domain *d = fid_to<Domain>(&df->fid);
	if (!d)
		return -FI_EINVAL;
	if (!attr || !out) {
		EFA_WARN(Cq, "fi_cq_open: pass a struct fi_cq_attr (zeroed for the defaults) and a place for the CQ");
		return -FI_EINVAL;
	}
	const fi_cq_format format = attr->format == FI_CQ_FORMAT_UNSPEC ? FI_CQ_FORMAT_CONTEXT : attr->format;
	if (!entry_size_of(format)) {
		EFA_WARN(Cq, "fi_cq_open: format %d is not supported", int(attr->format));
		return -FI_ENOSYS;
	}
	if (attr->wait_obj != FI_WAIT_NONE && attr->wait_obj != FI_WAIT_UNSPEC && attr->wait_obj != FI_WAIT_FD) {
		EFA_WARN(Cq, "fi_cq_open: wait object %d is not supported (FI_WAIT_NONE, UNSPEC, FD)", int(attr->wait_obj));
		return -FI_ENOSYS;
	}
	if (attr->wait_cond != FI_CQ_COND_NONE) {
		EFA_WARN(Cq, "fi_cq_open: wait conditions are not supported");
		return -FI_ENOSYS;
	}
	if (attr->flags & ~uint64_t(FI_AFFINITY))
		return -FI_EINVAL;

	auto *cq = new Cq();
	cq->hdr.magic = Cq::kMagic;
	cq->dom = d;
	cq->lock.set_threading(d->threading);
	cq->stage_lock.set_threading(d->threading);
	cq->format = format;
	cq->entry_size = entry_size_of(format);
	cq->wait_obj = attr->wait_obj;
	auto fail = [cq](int err) {
		if (cq->signal_fd >= 0)
			close(cq->signal_fd);
		if (cq->epfd >= 0)
			close(cq->epfd);
		delete cq;
		return err;
	};
	verbs::CqAttr ca;
	/* On the efa fabric the size is a hint (clients ask for 100 and keep thousands of
	 * operations in flight): the device CQ also holds the endpoints' own packets. */
	size_t depth = attr->size ? attr->size : kDefaultDepth;
	if (d->rdm)
		depth = std::max<size_t>(depth, kDefaultDepth);
	ca.depth = uint32_t(std::min<size_t>(depth, d->dev->attr().max_cqe));
	ca.unsolicited = d->dev->unsolicited_write_recv();
	if (attr->wait_obj != FI_WAIT_NONE) {
		auto ch = verbs::CompChannel::create(*d->dev);
		if (!ch.ok())
			return fail(ch.error());
		cq->channel = ch.take();
		fcntl(cq->channel.fd(), F_SETFL, fcntl(cq->channel.fd(), F_GETFL) | O_NONBLOCK);
		cq->signal_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		cq->epfd = epoll_create1(EPOLL_CLOEXEC);
		if (cq->signal_fd < 0 || cq->epfd < 0)
			return fail(-errno);
		epoll_event ev{};
		ev.events = EPOLLIN;
		epoll_ctl(cq->epfd, EPOLL_CTL_ADD, cq->channel.fd(), &ev);
		epoll_ctl(cq->epfd, EPOLL_CTL_ADD, cq->signal_fd, &ev);
		ca.channel = &cq->channel;
	}
	auto vcq = verbs::Cq::create(*d->dev, ca);
	if (!vcq.ok())
		return fail(vcq.error());
	cq->vcq = vcq.take();
	cq->slots.store(int64_t(cq->vcq.depth()));
	cq->cq.fid.fclass = FI_CLASS_CQ;
	cq->cq.fid.context = context;
	cq->cq.fid.ops = &g_cq_fi_ops;
	cq->cq.ops = &g_cq_ops;
	d->hdr.children++;
	*out = &cq->cq;
	return 0;
}

} // namespace efa
