/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Living beside libfabric's own (built-in) efa provider.
 *
 * libfabric registers the DL providers (FI_PROVIDER_PATH, or its provider directory)
 * before its built-in ones, and when two providers share a name it keeps one and hides
 * the other: a provider that FI_PROVIDER_PATH names with '+' (libfabric 1.18+) wins;
 * with FI_PROVIDER_PATH starting with '@' the first registered (a DL provider) wins;
 * otherwise the higher `version` wins, and on a tie the first registered. Both report
 * the libfabric release in libfabric's scheme (2.6.0 -> 206.0): ours the one it was
 * built against, the built-in one its own. So ours is kept beside the built-in provider
 * of the libfabric it was built for, hidden by that of a newer libfabric, and '@' or
 * '+' select it regardless (fi_efa(7), "Beside libfabric's built-in efa provider").
 *
 * libfabric does not log which one it hides, so this provider says it when it is
 * loaded: a warning when it will be hidden, an info line when it hides the built-in
 * one. A libfabric has a built-in efa provider when it links libefa (rdma-core's EFA
 * library); libfabric 2.x registers it on every host, 1.x only where it finds an EFA
 * device.
 */
#include "builtin.h"

#include "log.h"
#include "prov.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <rdma/fabric.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>

namespace efa {

namespace {

struct NeededScan {
	const char *object; /* path of the object to scan, as dladdr names it */
	const char *needed; /* DT_NEEDED entry to find */
	bool found;
};

int scan_object(dl_phdr_info *info, size_t, void *arg)
{
	auto *s = static_cast<NeededScan *>(arg);
	if (!info->dlpi_name || strcmp(info->dlpi_name, s->object) != 0)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		if (info->dlpi_phdr[i].p_type != PT_DYNAMIC)
			continue;
		auto *dyn = reinterpret_cast<const ElfW(Dyn) *>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
		const char *strtab = nullptr;
		for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++)
			if (d->d_tag == DT_STRTAB)
				strtab = reinterpret_cast<const char *>(d->d_un.d_ptr); /* relocated by ld.so */
		if (!strtab)
			return 1;
		for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++)
			if (d->d_tag == DT_NEEDED && strncmp(strtab + d->d_un.d_val, s->needed, strlen(s->needed)) == 0)
				s->found = true;
	}
	return 1;
}

std::string real(const char *path)
{
	char buf[PATH_MAX];
	return realpath(path, buf) ? std::string(buf) : std::string(path);
}

} // namespace

std::string libfabric_path()
{
	Dl_info info;
	if (!dladdr(reinterpret_cast<void *>(&fi_getinfo), &info) || !info.dli_fname)
		return {};
	return info.dli_fname;
}

bool libfabric_has_builtin_efa()
{
	std::string lib = libfabric_path();
	if (lib.empty())
		return false;
	NeededScan s{lib.c_str(), "libefa.so", false};
	dl_iterate_phdr(scan_object, &s);
	return s.found;
}

Precedence provider_path_precedence(const char *provider_path, const char *self)
{
	if (!provider_path || !*provider_path)
		return Precedence::Version;
	if (provider_path[0] == '@')
		return Precedence::Order;
	const std::string me = self ? real(self) : std::string();
	std::string list(provider_path);
	size_t start = 0;
	while (start <= list.size()) {
		size_t end = list.find(':', start);
		if (end == std::string::npos)
			end = list.size();
		std::string item = list.substr(start, end - start);
		if (item.size() > 1 && item[0] == '+' && !me.empty() && real(item.c_str() + 1) == me)
			return Precedence::Preferred;
		start = end + 1;
	}
	return Precedence::Version;
}

void log_builtin_efa()
{
	if (!libfabric_has_builtin_efa())
		return;
	Dl_info self{};
	dladdr(reinterpret_cast<void *>(&g_prov), &self);
	const char *me = self.dli_fname ? self.dli_fname : "libefa-fi.so";
	const uint32_t api = fi_version();
	const Precedence p = provider_path_precedence(getenv("FI_PROVIDER_PATH"), self.dli_fname);
	const bool plus_known = FI_VERSION_GE(api, FI_VERSION(1, 18));
	/* The built-in provider's version: libfabric's release; fi_version() lacks the
	 * revision, so a tie may be lost to a later revision of the same release. */
	const uint32_t theirs = FI_VERSION(FI_MAJOR(api) * 100 + FI_MINOR(api), 0);
	const char *why = nullptr;
	if (p == Precedence::Order)
		why = "FI_PROVIDER_PATH starts with '@'";
	else if (p == Precedence::Preferred && plus_known)
		why = "FI_PROVIDER_PATH names it with '+'";
	else if (FI_MAJOR(g_prov.version) >= FI_MAJOR(theirs))
		why = "its version is not lower and libfabric registers it first";
	if (why) {
		EFA_INFO(Core,
			 "libfabric %u.%u (%s) has a built-in efa provider; libfabric keeps this one (%s, version "
			 "%u.%u) and hides the built-in one, as %s. To use the built-in one, leave this one out of "
			 "FI_PROVIDER_PATH (fi_efa(7))",
			 FI_MAJOR(api), FI_MINOR(api), libfabric_path().c_str(), me, FI_MAJOR(g_prov.version),
			 FI_MINOR(g_prov.version), why);
		return;
	}
	EFA_WARN(Core,
		 "libfabric %u.%u (%s) has a built-in efa provider of a higher version (%u.x): wherever it "
		 "registers (libfabric 2.x: always; 1.x: on a host with an EFA device) libfabric uses it and hides "
		 "this one (%s, version %u.%u). To use this one, set FI_PROVIDER_PATH=@<its directory>%s (fi_efa(7))",
		 FI_MAJOR(api), FI_MINOR(api), libfabric_path().c_str(), FI_MAJOR(theirs), me,
		 FI_MAJOR(g_prov.version), FI_MINOR(g_prov.version),
		 plus_known ? " or FI_PROVIDER_PATH=+<its path>" : "");
}

} // namespace efa
