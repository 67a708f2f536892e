/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
#include "params.h"

#include "prov.h"

#include <rdma/providers/fi_prov.h>

#include <cstdlib>
#include <mutex>

namespace efa {

namespace {

constexpr fi_param_type kType_STR = FI_PARAM_STRING;
constexpr fi_param_type kType_INT = FI_PARAM_INT;
constexpr fi_param_type kType_BOOL = FI_PARAM_BOOL;
constexpr fi_param_type kType_SIZE = FI_PARAM_SIZE_T;

[[maybe_unused]] void set_default(std::string &f, const char *d) { f = d; }
[[maybe_unused]] void set_default(int &f, const char *d) { f = std::atoi(d); }
[[maybe_unused]] void set_default(bool &f, const char *d) { f = std::atoi(d) != 0; }
[[maybe_unused]] void set_default(size_t &f, const char *d) { f = *d ? size_t(std::strtoull(d, nullptr, 0)) : kParamUnset; }

[[maybe_unused]] void read(const char *name, std::string &f)
{
	char *v = nullptr;
	if (fi_param_get_str(&g_prov, name, &v) == 0 && v)
		f = v;
}
[[maybe_unused]] void read(const char *name, int &f)
{
	int v;
	if (fi_param_get_int(&g_prov, name, &v) == 0)
		f = v;
}
[[maybe_unused]] void read(const char *name, bool &f)
{
	int v;
	if (fi_param_get_bool(&g_prov, name, &v) == 0)
		f = v != 0;
}
[[maybe_unused]] void read(const char *name, size_t &f)
{
	size_t v;
	if (fi_param_get_size_t(&g_prov, name, &v) == 0)
		f = v;
}

const char *const kNames[] = {
#define EFA_X(field, name, type, def, help) name,
	EFA_PARAM_TABLE(EFA_X)
#undef EFA_X
};

} // namespace

void params_define(const fi_provider *prov)
{
#define EFA_X(field, name, type, def, help) \
	fi_param_define(prov, name, kType_##type, "%s (default: %s)", help, *def ? def : "unset");
	EFA_PARAM_TABLE(EFA_X)
#undef EFA_X
}

const Params &params()
{
	static Params p;
	static std::once_flag once;
	std::call_once(once, [] {
#define EFA_X(field, name, type, def, help) \
	set_default(p.field, def);          \
	read(name, p.field);
		EFA_PARAM_TABLE(EFA_X)
#undef EFA_X
	});
	return p;
}

const char *const *param_names(size_t *count)
{
	*count = sizeof kNames / sizeof kNames[0];
	return kNames;
}

} // namespace efa
