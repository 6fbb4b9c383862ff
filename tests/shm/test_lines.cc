// Line-mode stream layout (core/shm/lines.h), in one process: every stream
// position lands in its line's payload, the two sources join seamlessly, and
// ready() needs every line of a range.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/shm/lines.h"

namespace mlxa2a::shm::test {
namespace {

struct Area {
  alignas(lines::kBytes) char bytes[64 * lines::kBytes] = {};
};

TEST(Lines, PublishThenReadEveryRangeAcrossBothSources) {
  std::vector<char> a(150), b(97);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<char>(i * 7 + 1);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<char>(i * 11 + 3);
  Area area;
  lines::publish(area.bytes, a.data(), a.size(), b.data(), b.size(), 42);
  const std::size_t total = a.size() + b.size();
  ASSERT_EQ(lines::count(total), 5u);
  for (std::size_t line = 0; line < lines::count(total); ++line) {
    EXPECT_EQ(lines::seq(area.bytes, line).load(), 42u) << "line " << line;
  }
  EXPECT_EQ(lines::seq(area.bytes, 5).load(), 0u) << "nothing past the stream";
  for (std::size_t off = 0; off < total; off += 13) {
    for (std::size_t len = 1; off + len <= total; len += 29) {
      std::vector<char> got(len);
      lines::read(area.bytes, off, len, got.data());
      for (std::size_t i = 0; i < len; ++i) {
        const std::size_t pos = off + i;
        const char want = pos < a.size() ? a[pos] : b[pos - a.size()];
        ASSERT_EQ(got[i], want) << "off " << off << " len " << len << " byte " << i;
      }
    }
  }
}

TEST(Lines, EmptyFirstSourceAndExactLineMultiples) {
  std::vector<char> b(2 * lines::kPayload);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<char>(i + 5);
  Area area;
  lines::publish(area.bytes, nullptr, 0, b.data(), b.size(), 7);
  EXPECT_EQ(lines::seq(area.bytes, 1).load(), 7u);
  EXPECT_EQ(lines::seq(area.bytes, 2).load(), 0u);
  std::vector<char> got(b.size());
  lines::read(area.bytes, 0, got.size(), got.data());
  EXPECT_EQ(got, b);
}

TEST(Lines, ReadyNeedsEveryLineOfTheRange) {
  Area area;
  for (std::size_t line = 0; line < 4; ++line) lines::seq(area.bytes, line).store(9);
  EXPECT_TRUE(lines::ready(area.bytes, 0, 3, 9));
  EXPECT_TRUE(lines::ready(area.bytes, 1, 2, 8));
  EXPECT_FALSE(lines::ready(area.bytes, 0, 3, 10));
  lines::seq(area.bytes, 2).store(7);  // one stale line in the middle
  EXPECT_FALSE(lines::ready(area.bytes, 0, 3, 9));
  EXPECT_TRUE(lines::ready(area.bytes, 3, 3, 9));
}

}  // namespace
}  // namespace mlxa2a::shm::test
