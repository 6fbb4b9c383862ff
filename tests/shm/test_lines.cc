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

// copy_small (every size it takes) and copy (past it) move exactly n bytes:
// none of the guard bytes around the destination change, whatever the
// alignment of either side.
TEST(Lines, CopyMovesExactlyNBytesAtEveryOffset) {
  constexpr std::size_t kGuard = 16, kMax = 80;
  for (std::size_t n = 0; n <= kMax; ++n) {
    for (std::size_t shift = 0; shift < 8; ++shift) {
      std::vector<char> src(kMax + 8), dst(kMax + 8 + 2 * kGuard, '\x5c');
      for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 13 + n + 1);
      char* d = dst.data() + kGuard + (7 - shift);
      const char* s = src.data() + shift;
      if (n <= 64) {
        lines::copy_small(d, s, n);
      } else {
        lines::copy(d, s, n);
      }
      for (std::size_t i = 0; i < dst.size(); ++i) {
        const char* p = dst.data() + i;
        if (p >= d && p < d + n) {
          ASSERT_EQ(*p, s[p - d]) << "n " << n << " shift " << shift << " byte " << (p - d);
        } else {
          ASSERT_EQ(*p, '\x5c') << "n " << n << " shift " << shift << " guard at " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace mlxa2a::shm::test
