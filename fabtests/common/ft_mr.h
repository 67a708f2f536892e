/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Registered buffers. Every buffer an operation touches is registered and its
 * fi_mr_desc passed (FI_MR_LOCAL); keys come from fi_mr_key (FI_MR_PROV_KEY), and when
 * the provider lets the application choose them each registration asks for a new one.
 * A peer addresses a region by virtual address under FI_MR_VIRT_ADDR, else by offset.
 */
#pragma once

#include "ft_fabric.h"

#include <cstdlib>
#include <memory>

namespace ft {

/* What a peer needs to reach a registered region; sent over the control channel. */
struct RemoteMr {
	uint64_t base = 0; /* address of byte 0: virtual address or 0 (offsets) */
	uint64_t key = 0;
	uint64_t len = 0;
	uint64_t at(size_t offset) const { return base + offset; }
};

class Buffer {
public:
	/* Page-aligned, registered with `access` (default: fab.local_access()). */
	Buffer(const Fabric &fab, size_t len, uint64_t access = 0);
	Buffer(const Buffer &) = delete;
	Buffer &operator=(const Buffer &) = delete;

	uint8_t *data() const { return mem_.get(); }
	size_t size() const { return len_; }
	void *desc() const { return desc_; }
	uint64_t key() const { return key_; }
	RemoteMr remote() const;

	/* Closes the registration (revokes the key); the memory stays. */
	void deregister() { mr_.close(); }

private:
	struct Free {
		void operator()(uint8_t *p) const { free(p); }
	};
	std::unique_ptr<uint8_t, Free> mem_;
	size_t len_;
	bool virt_addr_;
	void *desc_ = nullptr;
	uint64_t key_ = 0;
	Fid<fid_mr> mr_{"mr"}; /* declared after mem_: closed before the memory is freed */
};

} // namespace ft
