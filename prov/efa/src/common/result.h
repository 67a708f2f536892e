/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Result<T>: a value, or a negative error code (-FI_E*, which equals -errno for the
 * POSIX codes). The provider never throws; fallible functions return this.
 */
#ifndef EFA_COMMON_RESULT_H
#define EFA_COMMON_RESULT_H

#include <optional>
#include <utility>

namespace efa {

struct Err {
	int code; /* negative */
};

template <typename T> class [[nodiscard]] Result {
public:
	Result(T v) : value_(std::move(v)), err_(0) {}
	Result(Err e) : err_(e.code < 0 ? e.code : -e.code) {}

	bool ok() const { return err_ == 0; }
	explicit operator bool() const { return ok(); }
	int error() const { return err_; }
	T &operator*() { return *value_; }
	const T &operator*() const { return *value_; }
	T *operator->() { return &*value_; }
	const T *operator->() const { return &*value_; }
	T take() { return std::move(*value_); }

private:
	std::optional<T> value_;
	int err_;
};

} // namespace efa

#endif
