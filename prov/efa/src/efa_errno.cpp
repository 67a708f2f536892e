/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
#include "efa_errno.h"

namespace efa {

const char *efa_status_name(uint32_t code)
{
	switch (code) {
#define EFA_X(c, name, fierr, msg) \
	case c: return #name;
		EFA_STATUS_TABLE(EFA_X)
#undef EFA_X
	}
	return nullptr;
}

const char *efa_status_msg(uint32_t code)
{
	switch (code) {
#define EFA_X(c, name, fierr, msg) \
	case c: return msg;
		EFA_STATUS_TABLE(EFA_X)
#undef EFA_X
	}
	return "Unknown EFA completion status";
}

int efa_status_to_fi(uint32_t code)
{
	switch (code) {
#define EFA_X(c, name, fierr, msg) \
	case c: return fierr;
		EFA_STATUS_TABLE(EFA_X)
#undef EFA_X
	}
	return FI_EIO;
}

} // namespace efa
