/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * A stream of packets from one peer through v4::parse() and, for ordered REQs, the reorder
 * buffer as Ep::ordered_req drives it (classify, accept, then pop until null; docs/
 * protocol.md section 6). Input: window exponent (1 byte), first expected id (4 bytes),
 * then packets, each a 2-byte length and its bytes.
 *
 * Checked against a model: ids come out consecutively from the first expected id, each
 * chain holds only its id, ids reach() or more ahead are refused without being taken, no packet comes out twice, and at teardown every packet the
 * buffer took is either delivered or handed back by clear().
 */
#include "fuzz.h"

#include "rdm/pkt.h"
#include "rdm/reorder.h"

#include <vector>

using namespace efa::rdm;

namespace {

struct Item : ReorderLink<Item> {
	uint32_t id = 0;
	bool out = false;
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 5)
		return 0;
	const uint32_t window = 16u << (data[0] % 7); /* 16 .. 1024 */
	uint32_t first;
	std::memcpy(&first, data + 1, 4);
	data += 5;
	size -= 5;

	ReorderBuffer<Item> rob(window, first);
	std::vector<std::unique_ptr<Item>> items;
	uint32_t expect = first; /* the model's next id */
	size_t taken = 0, delivered = 0;
	auto deliver = [&](Item *it) {
		FUZZ_CHECK(!it->out && it->id == expect);
		it->out = true;
		delivered++;
	};

	while (size >= 2 && items.size() < 4096) {
		size_t len = size_t(data[0]) | size_t(data[1]) << 8;
		data += 2;
		size -= 2;
		if (len > size)
			len = size;
		auto buf = efa::fuzz::exact_copy(data, len);
		data += len;
		size -= len;
		Parsed pk;
		if (v4::parse(buf.get(), len, pk) != v4::Error::None || !is_ordered(pk))
			continue;
		const uint32_t id = msg_id_of(pk);
		const auto verdict = rob.classify(id);
		if (verdict == ReorderBuffer<Item>::Verdict::Past) {
			FUZZ_CHECK(int32_t(id - expect) < 0);
			continue;
		}
		if (verdict == ReorderBuffer<Item>::Verdict::Refused) {
			FUZZ_CHECK(id - expect >= rob.reach() && id - expect < 0x80000000u);
			FUZZ_CHECK(rob.accept(id, nullptr) == verdict); /* takes nothing */
			continue;
		}
		items.push_back(std::make_unique<Item>());
		Item *it = items.back().get();
		it->id = id;
		FUZZ_CHECK(rob.accept(id, it) == verdict);
		taken++;
		if (verdict == ReorderBuffer<Item>::Verdict::Queued) {
			FUZZ_CHECK(rob.expected() == expect);
			continue;
		}
		deliver(it);
		expect++;
		FUZZ_CHECK(rob.expected() == expect);
		while (Item *chain = rob.pop()) {
			for (; chain; chain = chain->rb_next)
				deliver(chain);
			expect++;
			FUZZ_CHECK(rob.expected() == expect);
		}
		FUZZ_CHECK(rob.capacity() <= window);
	}
	FUZZ_CHECK(rob.queued() == taken - delivered);
	size_t released = 0;
	rob.clear([&](Item *it) {
		FUZZ_CHECK(!it->out);
		it->out = true;
		released++;
	});
	FUZZ_CHECK(delivered + released == taken && rob.queued() == 0);
	return 0;
}
