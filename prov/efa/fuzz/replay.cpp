/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Runs a fuzz harness's LLVMFuzzerTestOneInput on every file of its committed corpus
 * (make check, built with g++): the corpus is a regression suite without clang. With
 * arguments, replays those files or directories instead (a crash file from libFuzzer).
 * Fails when it finds nothing to replay: a missing corpus is not a pass.
 */
#include "fuzz.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

bool replay_file(const fs::path &p)
{
	std::ifstream in(p, std::ios::binary);
	if (!in) {
		std::fprintf(stderr, "replay: cannot read %s\n", p.c_str());
		return false;
	}
	const std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
	LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
	return true;
}

} // namespace

int main(int argc, char **argv)
{
	std::vector<std::string> roots;
	for (int i = 1; i < argc; i++)
		roots.push_back(argv[i]);
#ifdef FUZZ_CORPUS
	if (roots.empty())
		roots.push_back(FUZZ_CORPUS);
#endif
	size_t n = 0;
	for (const std::string &r : roots) {
		std::error_code ec;
		if (fs::is_directory(r, ec)) {
			std::vector<fs::path> files;
			for (const auto &e : fs::directory_iterator(r, ec))
				if (e.is_regular_file())
					files.push_back(e.path());
			std::sort(files.begin(), files.end());
			for (const fs::path &f : files)
				n += replay_file(f);
		} else {
			if (!replay_file(r))
				return 1;
			n++;
		}
	}
	if (!n) {
		std::fprintf(stderr, "replay: no input found (corpus directory missing or empty?)\n");
		return 1;
	}
	std::printf("replayed %zu inputs: no crash\n", n);
	return 0;
}
