/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Living beside libfabric's built-in efa provider: detecting it, and telling the user
 * which of the two libfabric keeps (builtin.cpp explains the rules).
 */
#ifndef EFA_BUILTIN_H
#define EFA_BUILTIN_H

#include <string>

namespace efa {

/* How libfabric chooses between two providers named efa, given FI_PROVIDER_PATH. */
enum class Precedence {
	Version,   /* the higher version (the default) */
	Order,     /* FI_PROVIDER_PATH starts with '@': the first registered, a DL provider */
	Preferred, /* FI_PROVIDER_PATH names `self` with '+' (libfabric 1.18+) */
};

/* `provider_path`: FI_PROVIDER_PATH (may be null); `self`: this library's path. */
Precedence provider_path_precedence(const char *provider_path, const char *self);

/* The libfabric this process runs, as the dynamic loader names it. */
std::string libfabric_path();

/* Whether that libfabric was built with its own efa provider (it links libefa). */
bool libfabric_has_builtin_efa();

/* Called once when libfabric loads this provider: logs which efa provider libfabric
 * will keep when it has a built-in one (warning if this one is hidden). */
void log_builtin_efa();

} // namespace efa

#endif
