/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * L1: protection domain, memory region, address handle (with its AHN) and completion
 * channel, each an owning RAII handle that releases the rdma-core object (and logs a
 * failure to) when it goes out of scope. Movable, not copyable.
 */
#ifndef EFA_VERBS_RESOURCES_H
#define EFA_VERBS_RESOURCES_H

#include "common/result.h"
#include "verbs/device.h"

#include <cstring>
#include <utility>

namespace efa::verbs {

/* An owning pointer to an rdma-core object released through the Api table. */
template <typename T, int (*Release)(const Api &, T *)> class Handle {
public:
	Handle() = default;
	Handle(const Api *api, T *p) : api_(api), p_(p) {}
	Handle(Handle &&o) noexcept : api_(o.api_), p_(std::exchange(o.p_, nullptr)) {}
	Handle &operator=(Handle &&o) noexcept
	{
		if (this != &o) {
			reset();
			api_ = o.api_;
			p_ = std::exchange(o.p_, nullptr);
		}
		return *this;
	}
	~Handle()
	{
		if (p_) /* most handles in operation entries are empty: no call */
			reset();
	}
	T *get() const { return p_; }
	explicit operator bool() const { return p_; }
	/* Releases now; returns the rdma-core error (0 when empty). */
	int reset()
	{
		int ret = 0;
		if (p_)
			ret = Release(*api_, std::exchange(p_, nullptr));
		return ret;
	}

protected:
	const Api *api_ = nullptr;
	T *p_ = nullptr;
};

int release_pd(const Api &, ibv_pd *);
int release_mr(const Api &, ibv_mr *);
int release_ah(const Api &, ibv_ah *);
int release_channel(const Api &, ibv_comp_channel *);

class Pd : public Handle<ibv_pd, release_pd> {
public:
	using Handle::Handle;
	static Result<Pd> alloc(const Device &dev);
	const Api &api() const { return *api_; }
};

/* Access rights of a memory registration (IBV_ACCESS_* values), to be or'ed. */
enum Access : int {
	kLocalWrite = IBV_ACCESS_LOCAL_WRITE,
	kRemoteRead = IBV_ACCESS_REMOTE_READ,
	kRemoteWrite = IBV_ACCESS_REMOTE_WRITE,
};

class Mr : public Handle<ibv_mr, release_mr> {
public:
	using Handle::Handle;
	/* `access`: Access bits */
	static Result<Mr> reg(const Pd &pd, void *addr, size_t len, int access);
	uint32_t lkey() const { return p_->lkey; }
	uint32_t rkey() const { return p_->rkey; }
};

class Ah : public Handle<ibv_ah, release_ah> {
public:
	Ah() = default;
	/* An AH towards `gid`, with its address handle number (what receive CQEs report). */
	static Result<Ah> create(const Pd &pd, const ibv_gid &gid);
	static Result<Ah> create(const Pd &pd, const uint8_t gid[16])
	{
		ibv_gid g;
		std::memcpy(g.raw, gid, 16);
		return create(pd, g);
	}
	uint16_t ahn() const { return ahn_; }

private:
	Ah(const Api *api, ibv_ah *p, uint16_t ahn) : Handle(api, p), ahn_(ahn) {}
	uint16_t ahn_ = 0;
};

class CompChannel : public Handle<ibv_comp_channel, release_channel> {
public:
	using Handle::Handle;
	static Result<CompChannel> create(const Device &dev);
	int fd() const { return p_->fd; }
};

} // namespace efa::verbs

#endif
