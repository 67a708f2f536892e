/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Event queue (fi_eq(3)): read, readerr, write, sread with timeout, strerror. */
#include "fabric.h"

#include "efa_errno.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

namespace efa {

namespace {

void signal_fd(int fd)
{
	if (fd < 0)
		return;
	uint64_t one = 1;
	ssize_t r = write(fd, &one, sizeof one);
	(void)r;
}

void drain_fd(int fd)
{
	if (fd < 0)
		return;
	uint64_t v;
	ssize_t r = read(fd, &v, sizeof v);
	(void)r;
}

int eq_close(fid_t f)
{
	Eq *eq = fid_to<Eq>(f);
	if (!eq)
		return -FI_EINVAL;
	if (eq->hdr.children.load())
		return -FI_EBUSY;
	if (eq->fd >= 0)
		close(eq->fd);
	eq->fd = -1;
	eq->fabric->hdr.children--;
	retire(eq);
	return 0;
}

int eq_control(fid_t f, int command, void *arg)
{
	Eq *eq = fid_to<Eq>(f);
	if (!eq)
		return -FI_EINVAL;
	if (command == FI_GETWAIT) {
		if (eq->fd < 0 || !arg)
			return -FI_ENODATA;
		*static_cast<int *>(arg) = eq->fd;
		return 0;
	}
	if (command == FI_GETWAITOBJ) {
		if (!arg)
			return -FI_EINVAL;
		*static_cast<fi_wait_obj *>(arg) = eq->fd >= 0 ? FI_WAIT_FD : FI_WAIT_NONE;
		return 0;
	}
	return -FI_ENOSYS;
}

ssize_t eq_read_locked(Eq *eq, uint32_t *event, void *buf, size_t len, uint64_t flags)
{
	if (!eq->errors.empty())
		return -FI_EAVAIL;
	if (eq->events.empty())
		return -FI_EAGAIN;
	const Eq::Event &e = eq->events.front();
	if (len < e.data.size())
		return -FI_ETOOSMALL;
	if (event)
		*event = e.event;
	if (buf && !e.data.empty())
		std::memcpy(buf, e.data.data(), e.data.size());
	ssize_t n = ssize_t(e.data.size());
	if (!(flags & FI_PEEK)) {
		eq->events.pop_front();
		if (eq->events.empty() && eq->errors.empty())
			drain_fd(eq->fd);
	}
	return n;
}

ssize_t eq_read(fid_eq *f, uint32_t *event, void *buf, size_t len, uint64_t flags)
{
	Eq *eq = fid_to<Eq>(&f->fid);
	if (!eq || (flags & ~uint64_t(FI_PEEK)))
		return -FI_EINVAL;
	std::lock_guard<std::mutex> g(eq->lock);
	return eq_read_locked(eq, event, buf, len, flags);
}

ssize_t eq_readerr(fid_eq *f, fi_eq_err_entry *buf, uint64_t flags)
{
	Eq *eq = fid_to<Eq>(&f->fid);
	if (!eq || !buf || (flags & ~uint64_t(FI_PEEK)))
		return -FI_EINVAL;
	std::lock_guard<std::mutex> g(eq->lock);
	if (eq->errors.empty())
		return -FI_EAGAIN;
	Eq::Error &e = eq->errors.front();
	/* err_data: copy into the caller's buffer if it gave one (API >= 1.5), else ours. */
	void *user_data = buf->err_data;
	size_t user_size = buf->err_data_size;
	*buf = e.entry;
	eq->last_err_text = e.text;
	if (user_data && user_size) {
		size_t n = std::min(user_size, e.text.size() + 1);
		std::memcpy(user_data, e.text.c_str(), n);
		buf->err_data = user_data;
		buf->err_data_size = n;
	} else {
		buf->err_data = const_cast<char *>(eq->last_err_text.c_str());
		buf->err_data_size = eq->last_err_text.size() + 1;
	}
	if (!(flags & FI_PEEK)) {
		eq->errors.pop_front();
		if (eq->events.empty() && eq->errors.empty())
			drain_fd(eq->fd);
	}
	return sizeof(fi_eq_err_entry);
}

ssize_t eq_write(fid_eq *f, uint32_t event, const void *buf, size_t len, uint64_t flags)
{
	Eq *eq = fid_to<Eq>(&f->fid);
	if (!eq || (len && !buf) || flags)
		return -FI_EINVAL;
	eq->push(event, buf, len);
	return ssize_t(len);
}

ssize_t eq_sread(fid_eq *f, uint32_t *event, void *buf, size_t len, int timeout, uint64_t flags)
{
	Eq *eq = fid_to<Eq>(&f->fid);
	if (!eq || (flags & ~uint64_t(FI_PEEK)))
		return -FI_EINVAL;
	if (eq->fd < 0)
		return -FI_EINVAL; /* no wait object */
	const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout);
	for (;;) {
		{
			std::lock_guard<std::mutex> g(eq->lock);
			ssize_t ret = eq_read_locked(eq, event, buf, len, flags);
			if (ret != -FI_EAGAIN)
				return ret;
		}
		int wait_ms = -1;
		if (timeout >= 0) {
			auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
			if (left.count() <= 0)
				return -FI_EAGAIN;
			wait_ms = int(left.count());
		}
		pollfd p{eq->fd, POLLIN, 0};
		int r = poll(&p, 1, wait_ms);
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

const char *eq_strerror(fid_eq *, int prov_errno, const void *err_data, char *buf, size_t len)
{
	const char *msg = err_data ? static_cast<const char *>(err_data) : efa_status_msg(uint32_t(prov_errno));
	if (buf && len) {
		strncpy(buf, msg, len - 1);
		buf[len - 1] = 0;
		return buf;
	}
	return msg;
}

fi_ops g_eq_fi_ops = {
	.size = sizeof(fi_ops),
	.close = eq_close,
	.bind = no_bind,
	.control = eq_control,
	.ops_open = no_ops_open,
	.tostr = nullptr,
	.ops_set = nullptr,
};

fi_ops_eq g_eq_ops = {
	.size = sizeof(fi_ops_eq),
	.read = eq_read,
	.readerr = eq_readerr,
	.write = eq_write,
	.sread = eq_sread,
	.strerror = eq_strerror,
};

} // namespace

void Eq::push(uint32_t event, const void *buf, size_t len)
{
	std::lock_guard<std::mutex> g(lock);
	Event e{event, {}};
	if (len)
		e.data.assign(static_cast<const uint8_t *>(buf), static_cast<const uint8_t *>(buf) + len);
	events.push_back(std::move(e));
	signal_fd(fd);
}

void Eq::push_error(fid_t fid, void *context, uint64_t data, int err, int prov_errno, const std::string &text)
{
	std::lock_guard<std::mutex> g(lock);
	Error e{};
	e.entry.fid = fid;
	e.entry.context = context;
	e.entry.data = data;
	e.entry.err = err;
	e.entry.prov_errno = prov_errno;
	e.text = text;
	errors.push_back(std::move(e));
	signal_fd(fd);
}

int eq_open(fid_fabric *f, fi_eq_attr *attr, fid_eq **out, void *context)
{
	Fabric *fab = fid_to<Fabric>(&f->fid);
	if (!fab || !attr || !out)
		return -FI_EINVAL;
	if (attr->flags & ~uint64_t(FI_WRITE))
		return -FI_EINVAL;
	if (attr->wait_obj != FI_WAIT_NONE && attr->wait_obj != FI_WAIT_UNSPEC && attr->wait_obj != FI_WAIT_FD)
		return -FI_ENOSYS;
	auto *eq = new Eq();
	eq->hdr.magic = Eq::kMagic;
	eq->eq.fid.fclass = FI_CLASS_EQ;
	eq->eq.fid.context = context;
	eq->eq.fid.ops = &g_eq_fi_ops;
	eq->eq.ops = &g_eq_ops;
	eq->fabric = fab;
	eq->wait_obj = attr->wait_obj;
	eq->fd = attr->wait_obj == FI_WAIT_NONE ? -1 : eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	fab->hdr.children++;
	*out = &eq->eq;
	return 0;
}

} // namespace efa
