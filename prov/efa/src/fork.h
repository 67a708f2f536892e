/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * fork() (fi_efa(7), "fork()"): the provider's side of rdma-core's rules, and what a
 * child may do with what it inherited.
 *
 * Every object records the process generation it was made in (ObjHeader::gen): 0 in the
 * process that loaded the provider, one more in each fork() child (a pthread_atfork child
 * handler). An object of an earlier generation is its parent's: fid_to<> refuses it, so
 * in a child every call on an inherited fabric, domain, endpoint, CQ, counter, AV, EQ or
 * MR answers -FI_EINVAL with one log line, and touches nothing the parent still uses
 * (the device's queues, its sockets, shm's regions). The provider's own registered
 * buffers (packet pools, bounce buffers: DmaBuffer) are MADV_DONTFORK: a child has none
 * of them, and the parent's never become copy-on-write under the device.
 *
 * Memory the application registers is rdma-core's: on a kernel that copies registered
 * pages on fork (Linux 5.13+, ibv_is_fork_initialized() == IBV_FORK_UNNEEDED) nothing
 * is needed. On an older one the first domain turns rdma-core's fork support on
 * (ibv_fork_init(): registered pages become MADV_DONTFORK), unless FI_EFA_FORK_SAFE=0;
 * FI_EFA_FORK_SAFE=1 (or RDMAV_FORK_SAFE / IBV_FORK_SAFE) makes failing to do so an
 * error of fi_domain.
 */
#ifndef EFA_FORK_H
#define EFA_FORK_H

#include <cstddef>
#include <cstdint>

namespace efa {

namespace verbs {
struct Api;
}

/* fork::generation() without installing anything (the data path's check). */
extern uint32_t g_fork_generation;
inline uint32_t fork_generation() { return g_fork_generation; }

namespace fork {

/* This process's generation (see above). Installs the child handler on first use. */
uint32_t generation();

/* Logs, once per child, why an inherited object was refused. */
void refused();

/* At fi_domain, before the domain registers anything: rdma-core's fork support as
 * FI_EFA_FORK_SAFE asks. 0, or -FI_EINVAL when FI_EFA_FORK_SAFE=1 cannot be honoured. */
int prepare(const verbs::Api &api);

} // namespace fork

/* `len` bytes (whole pages) of a private anonymous mapping of its own, zeroed and
 * MADV_DONTFORK (a fork() child does not get it); `noreserve`: address space only,
 * pages come as they are touched. Null when the mapping fails. */
void *map_dontfork(size_t len, bool noreserve = false);

/* Memory the provider registers for itself: whole pages of its own mapping, zeroed,
 * MADV_DONTFORK. */
class DmaBuffer {
public:
	DmaBuffer() = default;
	DmaBuffer(const DmaBuffer &) = delete;
	DmaBuffer &operator=(const DmaBuffer &) = delete;
	~DmaBuffer() { reset(); }
	/* false: no memory (the previous buffer is released either way). */
	bool alloc(size_t len);
	void reset();
	uint8_t *data() const { return data_; }
	size_t size() const { return len_; }

private:
	uint8_t *data_ = nullptr;
	size_t len_ = 0, mapped_ = 0;
};

} // namespace efa

#endif
