/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Registered buffers. */
#include "ft_mr.h"

#include <cstring>

namespace ft {

Buffer::Buffer(const Fabric &fab, size_t len, uint64_t access)
	: len_(len), virt_addr_(fab.virt_addr())
{
	/* FI_MR_ALLOCATED: the memory is allocated before it is registered. Zero-length
	 * buffers still get a page, so every buffer has an address and a registration. */
	const size_t page = 4096;
	size_t alloc = (len + page - 1) / page * page;
	mem_.reset(static_cast<uint8_t *>(aligned_alloc(page, alloc ? alloc : page)));
	if (!mem_)
		FT_FAIL("cannot allocate %zu bytes", alloc);
	memset(mem_.get(), canary, alloc ? alloc : page);

	/* Without FI_MR_PROV_KEY the application chooses keys, unique in the domain. */
	static uint64_t next_key = 0x100;
	uint64_t requested = next_key++;
	FT_CALL(fi_mr_reg(fab.domain(), mem_.get(), len ? len : 1,
			  access ? access : fab.local_access(), 0, requested, 0, mr_.out(),
			  nullptr));
	desc_ = fi_mr_desc(mr_);
	key_ = fi_mr_key(mr_);
	FT_CHECK(key_ != FI_KEY_NOTAVAIL, "fi_mr_key returned FI_KEY_NOTAVAIL");
	if (!(fab.mr_mode() & FI_MR_PROV_KEY))
		FT_CHECK(key_ == requested, "fi_mr_key gave 0x%llx, requested 0x%llx",
			 (unsigned long long)key_, (unsigned long long)requested);
}

RemoteMr Buffer::remote() const
{
	RemoteMr r;
	r.base = virt_addr_ ? uint64_t(uintptr_t(mem_.get())) : 0;
	r.key = key_;
	r.len = len_;
	return r;
}

} // namespace ft
