/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The documentation covers what the code defines: every FI_EFA_* parameter and every
 * EFA completion status in fi_efa(7), every EFASIM_* variable in efasim(7).
 */
#include "efa_errno.h"
#include "params.h"

#include <criterion/criterion.h>

#include <cctype>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace {

std::string slurp(const std::string &rel)
{
	std::ifstream f(std::string(EFA_TEST_SRCDIR) + "/" + rel);
	cr_assert(f.good(), "cannot read %s", rel.c_str());
	std::stringstream ss;
	ss << f.rdbuf();
	return ss.str();
}

} // namespace

Test(docs, every_parameter_is_in_fi_efa_7)
{
	const std::string man = slurp("man/fi_efa.7.md");
	size_t n = 0;
	const char *const *names = efa::param_names(&n);
	cr_assert_gt(n, 0u);
	for (size_t i = 0; i < n; i++) {
		std::string env = "FI_EFA_";
		for (const char *c = names[i]; *c; c++)
			env += char(toupper(*c));
		cr_assert(man.find("*" + env + "*") != std::string::npos, "%s is not documented in man/fi_efa.7.md",
			  env.c_str());
	}
}

Test(docs, every_efa_status_is_in_fi_efa_7)
{
	const std::string man = slurp("man/fi_efa.7.md");
	for (uint32_t code = 1; code < 32; code++) {
		const char *name = efa::efa_status_name(code);
		if (!name)
			continue;
		cr_assert(man.find(std::string("| ") + name + " |") != std::string::npos,
			  "status %u (%s) missing from the error table of man/fi_efa.7.md", code, name);
		cr_assert_neq(efa::efa_status_to_fi(code), 0);
	}
	cr_assert_eq(efa::efa_status_to_fi(10), FI_ENORX);
	cr_assert(std::string(efa::efa_status_msg(10)).find("Receiver not ready") != std::string::npos);
}

Test(docs, every_efasim_variable_is_in_efasim_7)
{
	const std::string src = slurp("prov/efa/sim/config.cpp");
	const std::string man = slurp("man/efasim.7.md");
	std::regex var("\"(EFASIM_[A-Z_]+)\"");
	std::set<std::string> seen;
	for (auto it = std::sregex_iterator(src.begin(), src.end(), var); it != std::sregex_iterator(); ++it)
		seen.insert((*it)[1]);
	cr_assert_geq(seen.size(), 20u);
	for (const auto &v : seen)
		cr_assert(man.find("`" + v + "`") != std::string::npos, "%s is not documented in man/efasim.7.md",
			  v.c_str());
}
