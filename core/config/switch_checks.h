// The switch table's value checks (switches.cc's rows' `check`): each says
// what a value must be, or "" when it is fine. Pure functions of the value.
#pragma once

#include <cstdint>
#include <string>

#include "core/config/spec.h"

namespace mlxa2a::core::config::checks {

// Staging slots shape a segment of 2 x ranks x slot bytes per communicator:
// 1 GiB per slot is already far beyond what any call gains from (rounds of
// 128 KiB measure as fast), and keeps every layout product finite.
constexpr std::uint64_t kSlotSizeMax = std::uint64_t{1} << 30;

std::string check_align(const Value& v);
std::string check_nonzero_size(const Value& v);
std::string check_coll_stats(const Value& v);
std::string check_nonempty(const Value& v);
std::string check_slot_size(const Value& v);
std::string check_piece(const Value& v);
std::string check_leaders(const Value& v);
std::string check_fake_clock(const Value& v);
std::string check_node_layout(const Value& v);

}  // namespace mlxa2a::core::config::checks
